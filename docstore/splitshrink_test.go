package docstore

import (
	"strings"
	"testing"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// TestSplitShrinkReadByDocstore: a Store[T] shortens a split description
// (three parts to two, two to one property) with Update; docstore reads
// the card each time, with no stale part left for its join to trip on.
func TestSplitShrinkReadByDocstore(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	coll, err := OpenCollection(tablestore.New(client, &tablestore.Options{Partition: "p"}), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	store := tablestore.NewStore[card](client, &tablestore.Options{Partition: "p"}, nil)
	if _, err := store.Create(ctx, "c", card{Title: "t", Description: long("a")}); err != nil { // three parts
		t.Fatal(err)
	}
	for _, n := range []int{40_000, 5} { // two parts, then one property
		desc := strings.Repeat("d", n)
		if _, err := store.Update(ctx, "c", func(c *card) error { c.Description = desc; return nil }); err != nil {
			t.Fatal(err)
		}
		got := &docCard{Name: "c"}
		if err := coll.Get(ctx, got); err != nil {
			t.Fatalf("docstore read after the description shrank to %d characters: %v", n, err)
		}
		if got.Description != desc || got.Title != "t" {
			t.Errorf("docstore read after the description shrank to %d characters: %d characters, title %q", n, len(got.Description), got.Title)
		}
	}
}
