package docstore

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// A collection's queries never yield the index entries (or fence
// records) its backend keeps beside the documents: not a query of every
// document, nor one whose filter an entry's members would match, nor a
// query of a key range the entries sort in.
func TestQueryNeverYieldsEntries(t *testing.T) {
	for name, newBackend := range map[string]func(t *testing.T) edriver.Backend{
		"memstore": func(*testing.T) edriver.Backend { return memstore.New(nil) },
		"tables": func(t *testing.T) edriver.Backend {
			return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t)
			coll, err := OpenCollection(b, "name", &Options{PageSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = coll.Close() })
			fill(t, coll, 3)
			e := b.Abilities().Entries
			if e == nil {
				t.Fatalf("%T keeps no entries", b)
			}
			var actions []edriver.Action
			for _, value := range []string{"t1", "t2", "zz"} {
				data, _ := json.Marshal(map[string]string{"name": "k01", "Tag": value, "Doc": "k01"})
				actions = append(actions, edriver.Action{Key: e.Key("", "tag."+value), Write: edriver.Write{Data: data, Cond: edriver.Cond{Kind: edriver.CondCreate}}})
			}
			if _, err := b.Abilities().Commit(t.Context(), actions); err != nil {
				t.Fatal(err)
			}
			n := 0 // the entries are there, under their prefix
			for _, err := range b.List(t.Context(), e.Key("", "tag.")) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != 3 {
				t.Fatalf("List of the entries yields %d, want 3", n)
			}
			all := []string{"k00", "k01", "k02"}
			for what, c := range map[string]struct {
				got, want []string
			}{
				"all":         {names(t, coll.Query().Get(t.Context())), all},
				"Tag = t1":    {names(t, coll.Query().Where("Tag", "=", "t1").Get(t.Context())), []string{"k01"}},
				"Tag = zz":    {names(t, coll.Query().Where("Tag", "=", "zz").Get(t.Context())), nil},
				"name >= k01": {names(t, coll.Query().Where("name", ">=", "k01").Get(t.Context())), []string{"k01", "k02"}},
				"ordered":     {names(t, coll.Query().OrderBy("name", "desc").Get(t.Context())), []string{"k02", "k01", "k00"}},
			} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("query %s (-want +got):\n%s", what, diff)
				}
			}
		})
	}
}
