package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// docReads is a backend that counts the reads of documents (not index
// entries) by key, one by one or together.
type docReads struct {
	driver.Backend
	mu sync.Mutex
	n  map[string]int
}

func (d *docReads) count(keys ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		if !strings.HasPrefix(k, "\uFFFF") {
			d.n[k]++
		}
	}
}

func (d *docReads) Read(ctx context.Context, key string) (driver.Item, error) {
	d.count(key)
	return d.Backend.Read(ctx, key)
}

func (d *docReads) Abilities() driver.Abilities {
	a := d.Backend.Abilities()
	if many := a.ReadMany; many != nil {
		a.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
			d.count(keys...)
			return many(ctx, keys)
		}
	}
	return a
}

func (d *docReads) take() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.n
	d.n = map[string]int{}
	return n
}

// TestReindexRepairReadsWhatItDidNotWrite: Reindex's repair pass reads the
// documents of the entries it did not write or find right, and no
// others. A clean Reindex of 50 documents reads none; after a writer that
// does not declare the index renames one, the next Reindex reads that
// one document alone (its stale entry's), deletes the stale entry and
// makes the new one.
func TestReindexRepairReadsWhatItDidNotWrite(t *testing.T) {
	ctx := context.Background()
	b := &docReads{Backend: memstore.New(nil), n: map[string]int{}}
	plain := etagstore.New[card](b, nil)
	for i := range 50 {
		if _, err := plain.Create(ctx, fmt.Sprintf("k%02d", i), card{Title: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	cards := etagstore.New(b, nil, byTitle)
	b.take()
	if err := cards.Reindex(ctx, byTitle); err != nil {
		t.Fatal(err)
	}
	if got := b.take(); len(got) != 0 {
		t.Errorf("a clean Reindex read documents %v; want none: it wrote every entry its repair lists", got)
	}
	if _, err := plain.Update(ctx, "k07", func(c *card) error { c.Title = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	b.take()
	if err := cards.Reindex(ctx, byTitle); err != nil {
		t.Fatal(err)
	}
	if got := b.take(); len(got) != 1 || got["k07"] != 1 {
		t.Errorf("the second Reindex read documents %v; want k07 once (its stale entry's)", got)
	}
	if _, err := cards.GetBy(ctx, byTitle, "t7"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("GetBy of the old title = %v, want ErrNotFound", err)
	}
	if d, err := cards.GetBy(ctx, byTitle, "renamed"); err != nil || d.Key != "k07" {
		t.Errorf("GetBy of the new title = %q, %v; want k07", d.Key, err)
	}
	n := 0
	for _, err := range b.List(ctx, b.Abilities().Entries.Key("", "")) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 50 {
		t.Errorf("%d entries, want 50: one per document (the stale one deleted)", n)
	}
}
