package tablestore

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

type shrinking struct {
	Body string `table:"split"`
	N    int
}

// TestSplitShrinkRemovesParts: a split field shrinks to fewer parts, or
// to one property; a merge cannot remove the old parts Body‿k past the
// new count, so the entity is written whole (no changes), without them,
// whether or not the stored entity holds a property T does not know.
func TestSplitShrinkRemovesParts(t *testing.T) {
	var c EntityCodec
	for _, tc := range []struct {
		name    string
		body    string
		foreign bool
	}{
		{"one property", "short", false},
		{"fewer parts", strings.Repeat("y", 2*partUnits), false},
		{"one property, beside a foreign one", "short", true},
	} {
		stored, err := c.Marshal(shrinking{Body: strings.Repeat("x", 3*partUnits), N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if tc.foreign {
			stored = append(stored[:len(stored)-1], []byte(`,"Theirs":"t"}`)...)
		}
		var v shrinking
		base, err := c.Decode(stored, &v)
		if err != nil {
			t.Fatal(err)
		}
		v.Body = tc.body
		mine, _ := c.Marshal(v)
		data, changes, err := c.Merge(stored, base, mine)
		if err != nil {
			t.Fatal(err)
		}
		if changes != nil {
			t.Errorf("%s: a shrinking split field is merged (%s); want the whole entity written", tc.name, changes)
		}
		var d map[string]json.RawMessage
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(mine), "Body‿")
		for _, k := range slices.Sorted(maps.Keys(d)) {
			if part, i, ok := partOf([]byte(k)); ok && string(part) == "Body" && i > n {
				t.Errorf("%s: the entity written holds %s, past the new count", tc.name, k)
			}
		}
		if _, ok := d["Theirs"]; tc.foreign && !ok {
			t.Errorf("%s: the foreign property is gone: %s", tc.name, data)
		}
	}
}
