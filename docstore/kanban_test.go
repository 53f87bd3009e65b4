package docstore

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// card is the kanban card as a Store[T] program keeps it: a description
// too large for one table property (split), a list and a nested struct
// (held as JSON strings by tablestore's EntityCodec).
type card struct {
	Title       string
	Description string `table:"split"`
	Labels      []string
	Owner       owner
}

type owner struct {
	Name string
	Team string
}

// docCard is the same card as a docstore program declares it.
type docCard struct {
	Name             string `docstore:"name"`
	Title            string
	Description      string
	Labels           []string
	Owner            owner
	DocstoreRevision any
}

// long is a 100,000-character description (two parts of a table property
// and a third).
func long(c string) string { return strings.Repeat(c, 100_000) }

// The kanban card on tables, both ways: a Store[T] writes it with a split
// description, docstore reads it (the parts joined), updates it with mods
// (the new description written as parts), and the Store reads that; docstore
// writes one, the Store reads and updates it, docstore reads that. Queries
// on each kind of field (a string, the split description, a member of the
// nested struct) find both cards, and their rows carry the key.
func TestInteropTableKanban(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	coll, err := OpenCollection(tablestore.New(client, &tablestore.Options{Partition: "p"}), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	store := tablestore.NewStore[card](client, &tablestore.Options{Partition: "p"}, nil)
	team := owner{Name: "ana", Team: "core"}

	// Store[T] → docstore → Store[T].
	if _, err := store.Create(ctx, "c1", card{Title: "t", Description: long("a"), Labels: []string{"x", "y"}, Owner: team}); err != nil {
		t.Fatal(err)
	}
	got := &docCard{Name: "c1"}
	if err := coll.Get(ctx, got); err != nil {
		t.Fatal(err)
	}
	want := &docCard{Name: "c1", Title: "t", Description: long("a"), Labels: []string{"x", "y"}, Owner: team, DocstoreRevision: got.DocstoreRevision}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docstore read of a Store[T] card (-want +got):\n%s", diff)
	}
	if err := coll.Update(ctx, &docCard{Name: "c1"}, docstore.Mods{"Description": long("b"), "Labels": []string{"z"}, "Title": "t2"}); err != nil {
		t.Fatal(err)
	}
	d, err := store.Get(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(card{Title: "t2", Description: long("b"), Labels: []string{"z"}, Owner: team}, d.Value); diff != "" {
		t.Errorf("Store[T] read after a docstore Update (-want +got):\n%s", diff)
	}

	err = coll.Update(ctx, &docCard{Name: "c1"}, docstore.Mods{"Description": docstore.Increment(1)})
	if gcerrors.Code(err) != gcerrors.InvalidArgument || !strings.Contains(err.Error(), "Description") {
		t.Errorf("Increment of the split description = %v, want InvalidArgument naming the field", err)
	}

	// docstore → Store[T] → docstore.
	if err := coll.Put(ctx, &docCard{Name: "c2", Title: "t2", Description: long("c"), Labels: []string{"x"}, Owner: team}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(ctx, "c2", func(c *card) error { c.Labels = append(c.Labels, "w"); c.Description += "!"; return nil }); err != nil {
		t.Fatal(err)
	}
	got = &docCard{Name: "c2"}
	if err := coll.Get(ctx, got); err != nil {
		t.Fatal(err)
	}
	want = &docCard{Name: "c2", Title: "t2", Description: long("c") + "!", Labels: []string{"x", "w"}, Owner: team, DocstoreRevision: got.DocstoreRevision}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docstore read after a Store[T] update (-want +got):\n%s", diff)
	}

	for q, want := range map[*docstore.Query][]string{
		coll.Query().Where("Title", "=", "t2"):        {"c1", "c2"},
		coll.Query().Where("Description", ">=", "a"):  {"c1", "c2"}, // split on both: pushed down with the parts' count let through
		coll.Query().Where("Owner.Team", "=", "core"): {"c1", "c2"},
		coll.Query().Where("name", "=", "c1"):         {"c1"}, // the Store[T]'s card holds its key only as the RowKey
		coll.Query().Where("name", ">", "c1"):         {"c2"},
	} {
		var names []string
		it := q.Get(ctx)
		for {
			var c docCard
			if err := it.Next(ctx, &c); err != nil {
				break
			}
			names = append(names, c.Name)
		}
		it.Stop()
		if plan, _ := q.Plan(); !cmp.Equal(names, want) {
			t.Errorf("query %s: %q, want %q", plan, names, want)
		}
	}
}
