package etagstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Which keys a batch of transactions looks up before it sends: none that
// its Stores' version caches hold (most likely taken: the member leaves
// the batch and reads its key on its own), none it never met (the
// commit's condition decides), and, after a commit refused on a key it
// did not look up, every key for the next batches.

// lookedUp is heldCommits that records the keys of each ReadMany.
type lookedUp struct {
	*heldCommits
	mu    sync.Mutex
	reads [][]string
}

func (l *lookedUp) Abilities() driver.Abilities {
	a := l.heldCommits.Abilities()
	many := a.ReadMany
	a.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
		l.mu.Lock()
		l.reads = append(l.reads, slices.Clone(keys))
		l.mu.Unlock()
		return many(ctx, keys)
	}
	return a
}

// read reports whether a ReadMany since the last call looked key up.
func (l *lookedUp) read(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	found := false
	for _, keys := range l.reads {
		found = found || slices.Contains(keys, key)
	}
	l.reads = nil
	return found
}

// createWithSide creates key and puts "side/"+key.
func createWithSide(key string) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		if err := tx.Create(key, counter{1}); err != nil {
			return err
		}
		return tx.Put("side/"+key, counter{1})
	}
}

func TestTxCreateBatchLooksUpByPrediction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		l := &lookedUp{heldCommits: h}
		other := etagstore.New[counter](l, nil) // another process: a cache of its own
		s := etagstore.New[counter](l, nil)
		ctx := t.Context()
		if _, err := other.Create(ctx, "theirs", counter{100}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, "mine", counter{100}); err != nil {
			t.Fatal(err)
		}
		side := func(key string) error {
			_, err := s.Get(ctx, "side/"+key)
			return err
		}
		batch := func(second func(tx *etagstore.Tx[counter]) error) (e1, e2 error) {
			h.hold = make(chan struct{})
			l.read("") // forget what the set-up read
			return twoInOneBatch(t, h, s, increment("x"), second)
		}

		// A key s's cache never met is not looked up: the commit, refused,
		// tells. The member fails alone; the other commits.
		e1, e2 := batch(createWithSide("theirs"))
		wantOnly(t, "a Create of a key another process made", e2, etagstore.ErrExists)
		if e1 != nil || side("theirs") == nil {
			t.Errorf("the other member: %v; side/theirs: %v (want it missing)", e1, side("theirs"))
		}
		if l.read("theirs") {
			t.Errorf("a key the cache never met was looked up before the commit")
		}

		// That surprise makes the next batches look up every key created.
		e1, e2 = batch(createWithSide("new1"))
		if e1 != nil || e2 != nil || side("new1") != nil {
			t.Errorf("a batch creating a missing key: %v, %v; side/new1: %v", e1, e2, side("new1"))
		}
		if !l.read("new1") {
			t.Errorf("the batch after a refusal on a key it did not look up did not look new1 up")
		}
		for _, k := range []string{"filler1", "filler2"} { // the rest of the wary spell: 3 batches that create keys
			if e1, e2 := batch(createWithSide(k)); e1 != nil || e2 != nil {
				t.Errorf("a batch creating %s: %v, %v", k, e1, e2)
			}
		}

		// Then a key s's cache holds (s made it) is not looked up either:
		// its member runs on its own, and fails there.
		e1, e2 = batch(createWithSide("mine"))
		wantOnly(t, "a Create of a key the Store made", e2, etagstore.ErrExists)
		if e1 != nil || side("mine") == nil {
			t.Errorf("the other member: %v; side/mine: %v (want it missing)", e1, side("mine"))
		}
		if l.read("mine") {
			t.Errorf("a key the cache holds was looked up before the commit")
		}
		// A key the cache holds but another process deleted: the member,
		// out of the batch, reads it, finds it missing, and commits on
		// its own.
		if _, err := s.Create(ctx, "gone", counter{100}); err != nil {
			t.Fatal(err)
		}
		d, err := other.Get(ctx, "gone")
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Delete(ctx, "gone", d.ETag); err != nil {
			t.Fatal(err)
		}
		e1, e2 = batch(createWithSide("gone"))
		if e1 != nil || e2 != nil || side("gone") != nil {
			t.Errorf("a Create of a key the cache holds but is gone: %v, %v; side/gone: %v", e1, e2, side("gone"))
		}
		if d, err := s.Get(ctx, "gone"); err != nil || d.Value.N != 1 {
			t.Errorf("gone = %+v, %v; want the Create's 1", d.Value, err)
		}

		// And a missing key is committed on its condition, unread.
		e1, e2 = batch(createWithSide("new2"))
		if e1 != nil || e2 != nil || side("new2") != nil {
			t.Errorf("a batch creating a missing key: %v, %v; side/new2: %v", e1, e2, side("new2"))
		}
		if l.read("new2") {
			t.Errorf("a batch out of its wary spell looked a created key up")
		}
		if d, err := s.Get(ctx, "x"); err != nil || d.Value.N != 7 {
			t.Errorf("x = %+v, %v; want 7 (every batch's other member committed)", d.Value, err)
		}
	})
}
