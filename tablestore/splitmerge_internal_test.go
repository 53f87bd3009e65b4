package tablestore

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type shrinking struct {
	Body string `table:"split"`
	N    int
}

// serviceMerge is what Merge Entity does: the stored properties with
// changes' replacing or adding theirs.
func serviceMerge(t *testing.T, stored, changes []byte) map[string]json.RawMessage {
	var s, c map[string]json.RawMessage
	if err := json.Unmarshal(stored, &s); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(changes, &c); err != nil {
		t.Fatal(err)
	}
	for k := range c {
		delete(s, k)
		delete(s, k+"@odata.type")
	}
	for k, v := range c {
		s[k] = v
	}
	return s
}

// TestSplitShrinkKeepsPartsInData: a split field shrinks; a merge cannot
// remove the old parts Body‿1..k, so the service keeps them, and the data
// the Store keeps as the new version holds them too.
func TestSplitShrinkKeepsPartsInData(t *testing.T) {
	var c EntityCodec
	stored, err := c.Marshal(shrinking{Body: strings.Repeat("x", 3*partUnits), N: 1})
	if err != nil {
		t.Fatal(err)
	}
	var v shrinking
	base, err := c.Decode(stored, &v)
	if err != nil {
		t.Fatal(err)
	}
	v.Body = "short"
	mine, _ := c.Marshal(v)
	data, changes, err := c.Merge(stored, base, mine)
	if err != nil {
		t.Fatal(err)
	}
	if changes == nil {
		t.Fatal("a shrinking split field is written whole; want a merge of its changes (old parts stay, unread)")
	}
	svc := serviceMerge(t, stored, changes)
	var d map[string]json.RawMessage
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keys(svc), keys(d)) {
		t.Errorf("service holds %v, Store keeps data with %v", keys(svc), keys(d))
	}
}

func keys(m map[string]json.RawMessage) []string { return slices.Sorted(maps.Keys(m)) }
