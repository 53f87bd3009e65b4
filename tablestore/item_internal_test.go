package tablestore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore/driver"
)

// TestItem: an entity as the service returns it becomes an Item with its
// key, ETag and bookkeeping taken out and the document's properties left
// in Data as they were, whatever the spacing, escapes and places of the
// system properties.
func TestItem(t *testing.T) {
	cases := []struct {
		name, entity string
		want         driver.Item
	}{
		{"sdk order",
			`{"Body":"b","N":1,"PartitionKey":"p","RowKey":"r","Timestamp":"2026-01-01T00:00:00Z","Timestamp@odata.type":"Edm.DateTime","Title":"t","etagstoreMeta":"w=1","odata.etag":"W/\"e\"","odata.metadata":"m"}`,
			driver.Item{Key: "p/r", ETag: `W/"e"`, Meta: "w=1", Data: []byte(`{"Body":"b","N":1,"Title":"t"}`)}},
		{"system first and last, spaces",
			" {\n \"odata.etag\" : \"e\" , \"A\" : [1, \"}\"] ,\"A@odata.type\":\"x\", \"RowKey\":\"r\",\"PartitionKey\":\"p\" } ",
			driver.Item{Key: "p/r", ETag: "e", Data: []byte(`{"A" : [1, "}"],"A@odata.type":"x"}`)}},
		{"only system properties",
			`{"PartitionKey":"p","RowKey":"r","odata.etag":"e"}`,
			driver.Item{Key: "p/r", ETag: "e", Data: []byte(`{}`)}},
		{"empty", `{}`, driver.Item{Key: "/", Data: []byte(`{}`)}},
		{"escaped names and keys",
			`{"\u0041":"\u00e9\"","PartitionKey":"p\/q","Row\u004bey":"r\u2028"}`,
			driver.Item{Key: "p/q/r\u2028", Data: []byte(`{"\u0041":"\u00e9\""}`)}},
	}
	b := &Backend{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := b.item([]byte(c.entity))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("item(%s) (-want +got):\n%s", c.entity, diff)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{"a":1,}`, `{"PartitionKey":"p"`} {
		if it, err := b.item([]byte(bad)); err == nil {
			t.Errorf("item(%s) = %+v, want an error", bad, it)
		}
	}
}

// TestItemMatchesCopy: item, which moves the document's properties within
// the entity's own bytes, gives exactly what copying them out gives, for
// random entities (members in random order, awkward strings, system
// properties anywhere).
func TestItemMatchesCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	names := []string{"PartitionKey", "RowKey", "Timestamp", "Timestamp@odata.type", "odata.etag", "odata.metadata", MetaProperty, "A", "B@odata.type", "Body", "x\u00e9"}
	b := &Backend{opts: Options{Partition: "p"}}
	for i := range 2000 {
		var sb strings.Builder
		sb.WriteString(strings.Repeat(" ", rng.IntN(2)) + "{")
		for j, n := range rng.Perm(len(names))[:rng.IntN(len(names)+1)] {
			if j > 0 {
				sb.WriteString(strings.Repeat(" ", rng.IntN(2)) + ",")
			}
			name, _ := json.Marshal(names[n])
			value, _ := json.Marshal(randomText(rng, 40))
			if rng.IntN(4) == 0 {
				value = []byte(fmt.Sprintf(`{"n":[%d,%s]}`, rng.IntN(100), value))
			}
			sb.WriteString(string(name) + ":" + strings.Repeat(" ", rng.IntN(2)) + string(value))
		}
		sb.WriteString("}")
		entity := sb.String()
		want := copiedData(t, entity)
		got, err := b.item([]byte(entity))
		if err != nil {
			t.Fatalf("entity %d %s: %v", i, entity, err)
		}
		if string(got.Data) != want {
			t.Fatalf("entity %d %s: Data = %s, want %s", i, entity, got.Data, want)
		}
		var v map[string]any
		if err := json.Unmarshal(got.Data, &v); err != nil {
			t.Fatalf("entity %d %s: Data %s is not JSON: %v", i, entity, got.Data, err)
		}
	}
}

// copiedData is the document's properties of entity copied into a new
// object, in entity's order.
func copiedData(t *testing.T, entity string) string {
	t.Helper()
	var kept []string
	err := eachMember([]byte(entity), func(name, _, member []byte) bool {
		if string(name) != MetaProperty && !systemProperty(name) {
			kept = append(kept, string(member))
		}
		return true
	})
	if err != nil {
		t.Fatalf("%s: %v", entity, err)
	}
	return "{" + strings.Join(kept, ",") + "}"
}

// TestEntityBody: the body of a write holds the keys and the bookkeeping
// as JSON strings, however awkward, and the document's properties.
func TestEntityBody(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		pk, rk, meta := randomText(rng, 20), randomText(rng, 20), randomText(rng, 20)
		doc := map[string]any{"A": randomText(rng, 30), "B": float64(rng.IntN(1000))}
		data, _ := json.Marshal(doc)
		if rng.IntN(4) == 0 {
			data, doc = []byte(" { } "), map[string]any{}
		}
		body, err := entity(pk, rk, meta, data)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("entity(%q, %q, %q, %s) = %s: %v", pk, rk, meta, data, body, err)
		}
		want := map[string]any{"PartitionKey": pk, "RowKey": rk}
		if meta != "" {
			want[MetaProperty] = meta
		}
		for k, v := range doc {
			want[k] = v
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("entity(%q, %q, %q, %s) (-want +got):\n%s", pk, rk, meta, data, diff)
		}
	}
	for _, bad := range []string{``, `[]`, `"a"`, `{`} {
		if _, err := entity("p", "r", "", []byte(bad)); err == nil {
			t.Errorf("entity with data %q: no error", bad)
		}
	}
}
