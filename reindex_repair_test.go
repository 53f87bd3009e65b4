package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
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

// entryListings is a backend that counts the index entries its List and
// ListPage yield.
type entryListings struct {
	driver.Backend
	mu sync.Mutex
	n  int
}

func (e *entryListings) count(key string) {
	if strings.HasPrefix(key, "\uFFFF") {
		e.mu.Lock()
		e.n++
		e.mu.Unlock()
	}
}

func (e *entryListings) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		for it, err := range e.Backend.List(ctx, prefix) {
			e.count(it.Key)
			if !yield(it, err) {
				return
			}
		}
	}
}

func (e *entryListings) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	items, more, err := e.Backend.ListPage(ctx, prefix, after, limit)
	for _, it := range items {
		e.count(it.Key)
	}
	return items, more, err
}

func (e *entryListings) take() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.n
	e.n = 0
	return n
}

// TestReindexFreshIndexListsNoEntries: a Reindex of an index that has no
// entries yet lists none (it asks once whether there are any, finds
// none, and has nothing to repair), where it used to list back every
// entry it had written. A second Reindex, over a scope that holds
// entries, lists them all: its repair pass still runs.
func TestReindexFreshIndexListsNoEntries(t *testing.T) {
	ctx := context.Background()
	b := &entryListings{Backend: memstore.New(nil)}
	plain := etagstore.New[card](b, nil)
	for i := range 50 {
		if _, err := plain.Create(ctx, fmt.Sprintf("k%02d", i), card{Title: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	cards := etagstore.New(b, nil, byTitle)
	if err := cards.Reindex(ctx, byTitle); err != nil {
		t.Fatal(err)
	}
	if got := b.take(); got != 0 {
		t.Errorf("a Reindex of a fresh index listed %d entries, want 0", got)
	}
	if got := len(titleEntries(t, b.Backend)); got != 50 {
		t.Errorf("%d entries, want 50", got)
	}
	if err := cards.Reindex(ctx, byTitle); err != nil {
		t.Fatal(err)
	}
	if got := b.take(); got < 50 {
		t.Errorf("a second Reindex listed %d entries, want at least 50 (its repair)", got)
	}
}
