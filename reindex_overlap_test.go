package etagstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// TestReindexBatchesTwoInFlight: a page's batches go two at a time. The
// first batch waits at a gate until the second has been sent; no more
// than two are ever in flight, and the pass makes every entry.
func TestReindexBatchesTwoInFlight(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 1500) // pages of 999 (10 batches) and 501
	second, release := make(chan struct{}), make(chan struct{})
	g := &reindexGate{Backend: mem, hold: func(rank int) {
		switch rank {
		case 1:
			<-release
		case 2:
			close(second)
		}
	}}
	cards := etagstore.New(g, nil, byTitle)
	done := reindexing(ctx, cards)
	waitFor(t, second, "second batch sent while the first is held")
	close(release)
	if err := waitFor(t, done, "end of Reindex"); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if g.maxInFlight != 2 {
		t.Errorf("at most %d batches in flight, want 2", g.maxInFlight)
	}
	wantTitleEntries(t, mem, want)
}

// TestReindexRechecksBehind: a page is listed again while the next
// page's batches go. The first page's second listing waits at a gate
// until a batch of the second page has been sent; the pass then makes
// every entry.
func TestReindexRechecksBehind(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 1500) // pages of 999 (batches 1 to 10) and 501
	nextPage, release := make(chan struct{}), make(chan struct{})
	g := &reindexGate{Backend: mem,
		hold: func(rank int) {
			if rank == 11 {
				close(nextPage)
			}
		},
		relisted: func(after, through string) {
			if after == "" {
				<-release
			}
		},
	}
	cards := etagstore.New(g, nil, byTitle)
	done := reindexing(ctx, cards)
	waitFor(t, nextPage, "batch of the second page while the first page's second listing is held")
	close(release)
	if err := waitFor(t, done, "end of Reindex"); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	wantTitleEntries(t, mem, want)
}

// TestReindexEntryChangedBeforeItsReplace: a stale entry (its document
// gone) that changes again between Reindex's read of it and its replace
// is read again and replaced: the pass goes on, and ends with exactly
// the documents' entries.
func TestReindexEntryChangedBeforeItsReplace(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 10)
	cards := etagstore.New(mem, nil, byTitle)
	gone, err := cards.Create(ctx, "gone", card{Title: "t3"}) // t3's entry names "gone"
	if err != nil {
		t.Fatal(err)
	}
	if err := etagstore.New[card](mem, nil).Delete(ctx, "gone", gone.ETag); err != nil { // a writer without the index: the entry stays
		t.Fatal(err)
	}
	var changed error
	g := &reindexGate{Backend: mem, fail: func(rank int) error {
		if rank == 2 { // the replace of t3's stale entry, read after the first batch was refused
			changed = rewriteEntry(ctx, mem, "t3")
		}
		return nil
	}}
	if err := etagstore.New(g, nil, byTitle).Reindex(ctx, byTitle); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if changed != nil {
		t.Fatal(changed)
	}
	if g.rank != 3 {
		t.Errorf("%d commits of entries, want 3: the batch, the refused replace, the replace", g.rank)
	}
	wantTitleEntries(t, mem, want)
}

// rewriteEntry writes the title index's entry of value again, as it is:
// its ETag changes.
func rewriteEntry(ctx context.Context, b driver.Backend, value string) error {
	sp := b.Abilities().Entries
	for it, err := range b.List(ctx, sp.Key("", "u.title.")) {
		if err != nil {
			return err
		}
		var e struct{ Value string }
		if err := json.Unmarshal(it.Data, &e); err != nil {
			return err
		}
		if e.Value == value {
			_, err := b.Write(ctx, it.Key, driver.Write{Data: it.Data, Cond: driver.Cond{Kind: driver.CondNone}})
			return err
		}
	}
	return fmt.Errorf("no entry of %q", value)
}
