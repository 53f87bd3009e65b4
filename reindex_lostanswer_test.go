package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// errLost is an answer lost after its commit was applied, or before.
var errLost = fmt.Errorf("%w: connection reset (by the test)", driver.ErrAmbiguous)

// TestReindexBatchAnswerLost: a unique index's batch whose answer is lost
// after it was applied is not failed: its entries are read, found the
// documents' own, and not sent again.
func TestReindexBatchAnswerLost(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 1500) // pages of 999 (10 batches) and 501 (6)
	g := &reindexGate{Backend: mem, lose: func(rank int, _ []driver.Action) error {
		if rank == 1 || rank == 12 {
			return errLost
		}
		return nil
	}}
	if err := etagstore.New(g, nil, byTitle).Reindex(ctx, byTitle); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if g.rank != 16 {
		t.Errorf("%d commits of entries, want 16: none sent again", g.rank)
	}
	wantTitleEntries(t, mem, want)
}

// TestReindexLookupBatchAnswerLost: a lookup index's batch whose answer is
// lost is sent again as it is (its writes are unconditioned), once.
func TestReindexLookupBatchAnswerLost(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	plain := etagstore.New[card](mem, nil)
	labelled := map[string][]string{}
	for i := range 300 {
		k, label := fmt.Sprintf("k%04d", i), fmt.Sprint("l", i%3)
		if _, err := plain.Create(ctx, k, card{Labels: []string{label}}); err != nil {
			t.Fatal(err)
		}
		labelled[label] = append(labelled[label], k)
	}
	g := &reindexGate{Backend: mem, lose: func(rank int, _ []driver.Action) error {
		if rank == 1 {
			return errLost
		}
		return nil
	}}
	cards := etagstore.New(g, nil, byLabel)
	if err := cards.Reindex(ctx, byLabel); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if g.rank != 4 {
		t.Errorf("%d commits of entries, want 4: 3 batches, the first sent again", g.rank)
	}
	for label, keys := range labelled {
		var got []string
		for d, err := range cards.ListBy(ctx, byLabel, label) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d.Key)
		}
		if !slices.Equal(got, keys) {
			t.Errorf("ListBy(%q): %d documents, want %d", label, len(got), len(keys))
		}
	}
}

// TestReindexBatchThrottled: a batch the service refuses unapplied
// (throttled) twice is sent again after a pause each, 50 ms then 100 ms,
// and the pass ends with every entry.
func TestReindexBatchThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		mem := memstore.New(nil)
		want := seedCards(t, mem, 50) // one batch
		throttled := fmt.Errorf("%w: server busy (the test)", driver.ErrNotApplied)
		g := &reindexGate{Backend: mem, fail: func(rank int) error {
			if rank <= 2 {
				return throttled
			}
			return nil
		}}
		start := time.Now()
		if err := etagstore.New(g, nil, byTitle).Reindex(ctx, byTitle); err != nil {
			t.Fatalf("Reindex: %v", err)
		}
		if waited := time.Now().Sub(start); waited < 150*time.Millisecond {
			t.Errorf("Reindex took %v of the bubble's clock, want at least the pauses' 150ms", waited)
		}
		wantTitleEntries(t, mem, want)
	})
}

// TestReindexBatchUnavailable: a batch whose every answer is lost (and
// that never applied) ends the pass after 4 sends with an error matching
// ErrUnavailable alone; a second Reindex makes every entry.
func TestReindexBatchUnavailable(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 50)
	g := &reindexGate{Backend: mem, fail: func(rank int) error { return errLost }}
	cards := etagstore.New(g, nil, byTitle)
	err := cards.Reindex(ctx, byTitle)
	if !errors.Is(err, etagstore.ErrUnavailable) || errors.Is(err, etagstore.ErrExists) || errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("Reindex with every answer lost: %v, want ErrUnavailable alone", err)
	}
	if g.rank != 4 {
		t.Errorf("%d sends, want 4", g.rank)
	}
	g.fail = nil
	if err := cards.Reindex(ctx, byTitle); err != nil {
		t.Fatalf("second Reindex: %v", err)
	}
	wantTitleEntries(t, mem, want)
}

// TestReindexRepairAnswerLost: the delete of a stale entry (left by a
// writer without the index) whose answer is lost after it was applied is
// sent again, refused as gone, and the pass ends with exactly the
// documents' entries.
func TestReindexRepairAnswerLost(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	cards := etagstore.New(mem, nil, byTitle)
	want := map[string]string{}
	for i := range 10 {
		k, title := fmt.Sprintf("k%04d", i), fmt.Sprint("t", i)
		if _, err := cards.Create(ctx, k, card{Title: title}); err != nil {
			t.Fatal(err)
		}
		want[title] = k
	}
	if _, err := etagstore.New[card](mem, nil).Update(ctx, "k0003", func(c *card) error { c.Title = "moved"; return nil }); err != nil {
		t.Fatal(err) // a writer without the index: t3's entry stays, stale
	}
	delete(want, "t3")
	want["moved"] = "k0003"
	lost := 0
	g := &reindexGate{Backend: mem, lose: func(_ int, acts []driver.Action) error {
		if acts[0].Delete && lost == 0 {
			lost++
			return errLost
		}
		return nil
	}}
	if err := etagstore.New(g, nil, byTitle).Reindex(ctx, byTitle); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if lost != 1 {
		t.Errorf("%d deletes' answers lost, want 1: the stale entry's", lost)
	}
	wantTitleEntries(t, mem, want)
}
