package etagstore_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// The members of a batch whose unique values are most likely held (their
// Store wrote the entries lately) leave the batch, and their values are
// read together beside its commit: one read of their entries, not one
// each. A member whose value a document holds fails with the error
// naming it; one whose value is free after all (the holder renamed by
// another process) commits on its own. The documents the entries most
// likely name (those the Store's own writes of them named) are read
// with the entries, not after them.
func TestTxUniquePredictedHeldValuesReadTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		l := &lookedUp{heldCommits: h}
		byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
		counters := etagstore.New[counter](l, nil)
		cards := etagstore.New(l, nil, byTitle)
		other := etagstore.New(l, nil, byTitle) // another process
		ctx := t.Context()
		for key, title := range map[string]string{"card-1": "mine1", "card-2": "mine2", "card-3": "freed"} {
			if _, err := cards.Create(ctx, key, titled{title}); err != nil { // entries cards wrote lately
				t.Fatal(err)
			}
		}
		if _, err := other.Update(ctx, "card-3", func(c *titled) error { c.Title = "renamed"; return nil }); err != nil {
			t.Fatal(err)
		}
		create := func(key, title string) func(tx *etagstore.Txn) error {
			return func(tx *etagstore.Txn) error { return cards.In(tx).Put(key, titled{title}) }
		}
		var wg sync.WaitGroup
		holding(t, counters, &wg)
		l.entryReads() // forget what the set-up read
		errs := make([]error, 4)
		fns := []func(tx *etagstore.Txn) error{
			func(tx *etagstore.Txn) error { return counters.In(tx).Put("x", counter{1}) },
			create("c1", "mine1"), create("c2", "mine2"), create("c3", "freed"),
		}
		for i, fn := range fns {
			wg.Go(func() { errs[i] = etagstore.Transact(ctx, fn) })
			synctest.Wait()
		}
		close(h.hold)
		wg.Wait()

		if errs[0] != nil {
			t.Errorf("the member taking no value: %v", errs[0])
		}
		for i, holder := range map[int]string{1: "card-1", 2: "card-2"} {
			var ue *etagstore.UniqueError
			if !errors.As(errs[i], &ue) || ue.Key != holder {
				t.Errorf("member %d, taking a value %s holds: %v", i, holder, errs[i])
			}
			wantOnly(t, "a value held", errs[i], etagstore.ErrExists)
		}
		if errs[3] != nil {
			t.Errorf("the member taking a value freed by another process: %v", errs[3])
		}
		for key, want := range map[string]bool{"c1": false, "c2": false, "c3": true} {
			if _, err := cards.Get(ctx, key); (err == nil) != want {
				t.Errorf("%s stored: %v, want %v", key, err == nil, want)
			}
		}
		if d, err := cards.GetBy(ctx, byTitle, "freed"); err != nil || d.Key != "c3" {
			t.Errorf("GetBy freed = %q, %v; want c3", d.Key, err)
		}
		l.mu.Lock()
		for _, keys := range l.reads { // the holders, read with the entries naming them
			if (slices.Contains(keys, "card-1") || slices.Contains(keys, "card-2")) && !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "\uFFFF") }) {
				t.Errorf("the holders read apart from the entries: %q", keys)
			}
		}
		l.mu.Unlock()
		if _, most := l.entryReads(); most != 3 {
			t.Errorf("the predicted members' entries: at most %d read at once, want the 3 together", most)
		}
	})
}
