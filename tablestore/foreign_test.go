package tablestore_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/tablestore"
)

// card is what one program stores in an entity that another program
// (the raw SDK here, as a .NET service would) fills with properties of
// every EDM type.
type card struct {
	Title string
	N     int64
	Owner string `json:",omitempty"`
}

// foreignEntity has the properties another program wrote, with their
// types: whole Doubles among them, which the service returns without a
// type annotation, as it returns Int32.
func foreignEntity(rk string) map[string]any {
	return map[string]any{
		"PartitionKey": "p", "RowKey": rk, "Title": "t", "N": "1", "N@odata.type": "Edm.Int64", "Owner": "ann",
		"Price": 2.0, "Price@odata.type": "Edm.Double",
		"Big": 6824053932181.0, "Big@odata.type": "Edm.Double",
		"Ratio": 0.25, "Ratio@odata.type": "Edm.Double",
		"Count": 7,
		"Long":  "9007199254740993", "Long@odata.type": "Edm.Int64",
		"On":   true,
		"Text": "ünï",
		"When": "2026-11-26T05:30:00.1234567Z", "When@odata.type": "Edm.DateTime",
		"ID": "6f9619ff-8b86-d011-b42d-00c04fc964ff", "ID@odata.type": "Edm.Guid",
		"Blob": "AAEC+g==", "Blob@odata.type": "Edm.Binary",
	}
}

// tableWithForeign is a recorded table holding foreignEntity("c").
func tableWithForeign(t *testing.T) (*aztables.Client, *recorder) {
	rec := &recorder{}
	client := recordedTable(t, rec)
	addEntity(t, client, foreignEntity("c"))
	return client, rec
}

func addEntity(t *testing.T, client *aztables.Client, e map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(e)
	if _, err := client.AddEntity(t.Context(), raw, nil); err != nil {
		t.Fatal(err)
	}
}

var foreignNames = []string{"Price", "Big", "Ratio", "Count", "Long", "On", "Text", "When", "ID", "Blob"}

// TestForeignPropertiesNeverSent: Updates, a Replace of a read Doc and a
// Transact of the card type send only what they change, as a Merge
// Entity: no property of another program's is ever sent, so none changes
// its EDM type, whole Doubles included. Read back with full metadata,
// every foreign property has its type and value.
func TestForeignPropertiesNeverSent(t *testing.T) {
	client, rec := tableWithForeign(t)
	ctx := t.Context()
	s := tablestore.NewStore[card](client, &tablestore.Options{Partition: "p"}, nil)
	rec.take()
	if _, err := s.Update(ctx, "c", func(c *card) error { c.N++; c.Title = "moved"; return nil }); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	d.Value.N++
	if _, err := s.Replace(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transact(ctx, func(tx *etagstore.Tx[card]) error {
		c, err := tx.Get("c")
		if err != nil {
			return err
		}
		c.N++
		return tx.Put("c", c)
	}); err != nil {
		t.Fatal(err)
	}
	writes := 0
	for _, r := range rec.take() {
		if r.method == "GET" {
			continue
		}
		writes++
		for name := range members(t, r.body) {
			if slices.Contains(foreignNames, name) || name == "Owner" {
				t.Errorf("%s sent property %s, which it did not change: %s", r.method, name, r.body)
			}
		}
	}
	if writes != 3 {
		t.Errorf("%d writes, want 3", writes)
	}
	checkForeign(t, client, "c")
	if got, err := s.Get(ctx, "c"); err != nil || got.Value != (card{Title: "moved", N: 4, Owner: "ann"}) {
		t.Errorf("card = %+v, %v", got.Value, err)
	}
}

// checkForeign reads entity rk with full metadata and checks every
// foreign property's type and value.
func checkForeign(t *testing.T, client *aztables.Client, rk string) {
	t.Helper()
	full := aztables.MetadataFormatFull
	resp, err := client.GetEntity(t.Context(), "p", rk, &aztables.GetEntityOptions{Format: &full})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(resp.Value, &got); err != nil {
		t.Fatal(err)
	}
	want := foreignEntity(rk)
	for _, name := range foreignNames {
		// Azurite, like Azure, returns no annotation for Edm.Double (nor
		// Int32, Boolean, String): the Doubles are proved by the wire,
		// where they never go.
		if typ, ok := want[name+"@odata.type"]; ok && typ != "Edm.Double" && got[name+"@odata.type"] != typ {
			t.Errorf("%s has type %v, want %v (%s)", name, got[name+"@odata.type"], typ, resp.Value)
		}
		if g, w := got[name], want[name]; g != w && !(isNumber(g) && isNumber(w) && toFloat(g) == toFloat(w)) {
			t.Errorf("%s = %v, want %v", name, g, w)
		}
	}
}

func isNumber(v any) bool {
	switch v.(type) {
	case float64, int:
		return true
	}
	return false
}

func toFloat(v any) float64 {
	if i, ok := v.(int); ok {
		return float64(i)
	}
	return v.(float64)
}

// TestRemovalRefusedOverUntypedNumbers: a change that removes a property
// (an omitempty field emptied) needs the whole entity written, which
// would store another program's whole numbers, returned without a type,
// as Edm.Int32: it is refused, naming both, and nothing is sent. The same
// change over an entity holding no such number is written whole, and
// every foreign property keeps its type.
func TestRemovalRefusedOverUntypedNumbers(t *testing.T) {
	client, rec := tableWithForeign(t)
	ctx := t.Context()
	typed := foreignEntity("typed")
	for _, name := range []string{"Price", "Big", "Count"} {
		delete(typed, name)
		delete(typed, name+"@odata.type")
	}
	addEntity(t, client, typed)
	s := tablestore.NewStore[card](client, &tablestore.Options{Partition: "p"}, nil)
	rec.take()
	_, err := s.Update(ctx, "c", func(c *card) error { c.Owner = ""; return nil })
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("emptying Owner over untyped whole numbers: %v, want ErrInvalidInput", err)
	}
	t.Logf("refused: %v", err)
	for _, r := range rec.take() {
		if r.method != "GET" {
			t.Errorf("sent %s", r.method)
		}
	}
	if _, err := s.Update(ctx, "typed", func(c *card) error { c.Owner = ""; return nil }); err != nil {
		t.Fatal(err)
	}
	full := aztables.MetadataFormatFull
	resp, err := client.GetEntity(ctx, "p", "typed", &aztables.GetEntityOptions{Format: &full})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(resp.Value, &got)
	if _, ok := got["Owner"]; ok {
		t.Errorf("Owner still stored: %s", resp.Value)
	}
	for _, name := range slices.Collect(maps.Keys(typed)) {
		if _, ok := got[name]; !ok && name != "Owner" && name != "Ratio@odata.type" {
			t.Errorf("%s lost: %s", name, resp.Value)
		}
	}
}

// TestZeroValuesWritten: a zero time, a nil []byte and an empty GUID,
// which are no property, are written by an Update and by a Merge naming
// them (the whole entity, since Merge Entity cannot remove a property) and
// read back; set again, they are merged. UpsertMerge, which reads nothing,
// refuses them, nothing sent, saying to use Update.
func TestZeroValuesWritten(t *testing.T) {
	type zeros struct {
		When time.Time
		Blob []byte
		ID   string `table:"guid"`
		N    int64
	}
	client := recordedTable(t, &recorder{})
	ctx := t.Context()
	s := tablestore.NewStore[zeros](client, &tablestore.Options{Partition: "p"}, nil)
	set := zeros{When: time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), Blob: []byte{1}, ID: "6f9619ff-8b86-d011-b42d-00c04fc964ff"}
	if _, err := s.Create(ctx, "z", set); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "z", func(z *zeros) error { *z = zeros{N: 1}; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "z"); err != nil || !cmp.Equal(got.Value, zeros{N: 1}) {
		t.Fatalf("after zeroing: %+v, %v", got.Value, err)
	}
	if _, err := s.Update(ctx, "z", func(z *zeros) error { *z = set; return nil }); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, "z")
	if err != nil || !cmp.Equal(d.Value, set) {
		t.Fatalf("after setting again: %+v, %v", d.Value, err)
	}
	// Merge, which reads first, writes zero values too: the named
	// properties removed (the whole entity written), the rest kept.
	d.Value.When, d.Value.Blob, d.Value.ID, d.Value.N = time.Time{}, nil, "", 5
	if _, err := tablestore.Merge(ctx, s, d, "When", "Blob", "ID"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "z"); err != nil || !cmp.Equal(got.Value, zeros{N: set.N}) {
		t.Fatalf("after a Merge of zero values: %+v, %v (N is not named: it stays %d)", got.Value, err, set.N)
	}
	// UpsertMerge reads nothing: it cannot remove a property.
	if _, err := tablestore.UpsertMerge(ctx, s, "z", zeros{}, "When"); !errors.Is(err, etagstore.ErrInvalidInput) || !strings.Contains(err.Error(), "Update") {
		t.Errorf("UpsertMerge of a zero time: %v, want ErrInvalidInput saying to use Update", err)
	}
}
