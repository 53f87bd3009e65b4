package etagstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// What a batch of transactions reads of the unique values its members
// take before it sends: nothing, unless the group is wary. A value whose
// entry the Store wrote lately is most likely held: its member leaves the
// batch and learns on its own. Any other is left to the commit's
// condition; a commit refused on one (another process took it) makes the
// next batches read every value taken first.

type titled struct{ Title string }

// entryReads is how many ReadMany calls since the last call read index
// entries (memstore's keys under "\uFFFF"), and the most entries one
// read.
func (l *lookedUp) entryReads() (calls, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, keys := range l.reads {
		n := 0
		for _, k := range keys {
			if strings.HasPrefix(k, "\uFFFF") {
				n++
			}
		}
		if n > 0 {
			calls, most = calls+1, max(most, n)
		}
	}
	l.reads = nil
	return calls, most
}

func TestTxUniqueBatchPredictsHeldValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		l := &lookedUp{heldCommits: h}
		byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
		counters := etagstore.New[counter](l, nil)
		cards := etagstore.New(l, nil, byTitle)
		other := etagstore.New(l, nil, byTitle) // another process
		ctx := t.Context()
		if _, err := other.Create(ctx, "card-theirs", titled{"theirs"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cards.Create(ctx, "card-mine", titled{"mine"}); err != nil {
			t.Fatal(err)
		}
		create := func(key, title string) func(tx *etagstore.Txn) error {
			return func(tx *etagstore.Txn) error { return cards.In(tx).Put(key, titled{title}) }
		}
		// batch runs, in one batch behind a held commit, an increment of x
		// and the creates of two cards; it returns their errors.
		batch := func(k2, t2, k3, t3 string) (e1, e2, e3 error) {
			h.hold = make(chan struct{})
			var wg sync.WaitGroup
			holding(t, counters, &wg)
			l.entryReads() // forget what the set-up read
			wg.Go(func() { _, e1 = counters.Transact(ctx, increment("x")) })
			synctest.Wait()
			wg.Go(func() { e2 = etagstore.Transact(ctx, create(k2, t2)) })
			synctest.Wait()
			wg.Go(func() { e3 = etagstore.Transact(ctx, create(k3, t3)) })
			synctest.Wait()
			close(h.hold)
			wg.Wait()
			return e1, e2, e3
		}
		stored := func(key string) bool {
			_, err := cards.Get(ctx, key)
			return err == nil
		}

		// Values the Store never wrote are not read first: the commit,
		// refused on the one another process holds, tells. That member
		// fails alone; the others commit.
		commits := h.commits.Load()
		e1, e2, e3 := batch("c1", "theirs", "c2", "free1")
		var ue *etagstore.UniqueError
		if !errors.As(e2, &ue) || ue.Key != "card-theirs" || stored("c1") {
			t.Errorf("a card taking a value another process holds: %v; stored: %v", e2, stored("c1"))
		}
		if e1 != nil || e3 != nil || !stored("c2") {
			t.Errorf("the other members: %v, %v; c2 stored: %v", e1, e3, stored("c2"))
		}
		if calls, _ := l.entryReads(); calls != 0 {
			t.Errorf("%d reads of entries together, want none (the refusal reads its entry alone; a value of a refused commit is not taken as held)", calls)
		}
		if n := h.commits.Load() - commits; n != 3 { // hold, the refused batch, its members' next batch
			t.Errorf("%d commits, want 3: the refused batch's among them", n)
		}

		// That refusal makes the next batch read the values taken first.
		e1, e2, e3 = batch("c3", "free2", "c4", "free3")
		if e1 != nil || e2 != nil || e3 != nil || !stored("c3") || !stored("c4") {
			t.Errorf("a wary batch: %v, %v, %v", e1, e2, e3)
		}
		if _, most := l.entryReads(); most != 2 {
			t.Errorf("the batch after a refusal read %d entries at once, want both values taken", most)
		}
		// The wary spell is 3 batches that take values: the refused
		// batch's rerun, the one above, and this one.
		if _, e2, e3 := batch("c7", "free5", "c8", "free6"); e2 != nil || e3 != nil {
			t.Errorf("a wary batch: %v, %v", e2, e3)
		}
		l.entryReads()

		// Then a value the Store wrote lately is not read by the batch: its
		// member learns on its own that "mine" is held.
		e1, e2, e3 = batch("c5", "mine", "c6", "free4")
		if !errors.As(e2, &ue) || ue.Key != "card-mine" || stored("c5") {
			t.Errorf("a card taking a value the Store wrote: %v; stored: %v", e2, stored("c5"))
		}
		if e1 != nil || e3 != nil || !stored("c6") {
			t.Errorf("the other members: %v, %v; c6 stored: %v", e1, e3, stored("c6"))
		}
		if _, most := l.entryReads(); most > 1 {
			t.Errorf("a batch out of its wary spell read %d entries at once, want the held value's member to read its own alone", most)
		}
		if d, err := counters.Get(ctx, "x"); err != nil || d.Value.N != 4 {
			t.Errorf("x = %+v, %v; want 4", d.Value, err)
		}
	})
}
