package etagstore_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// A batch member whose fn chose the key it creates from what an earlier
// member of the batch wrote (a value not stored yet) made its Create on
// a view that may never exist: when the key is found existing (most
// likely taken, or looked up), ErrExists is fn's answer only if the
// reads its Create followed are current, and a value an earlier member
// wrote is not current until that member's commit lands. Here the
// earlier member's write never lands (its own Create is refused), so the
// view the second member's fn saw never existed: on its own, it reads
// the stored value and creates a key that is free.

func TestTxCreateExistsOnInheritedViewRunsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		other := etagstore.New[counter](h, nil) // another process: s's cache does not hold what it writes
		ctx := t.Context()
		if _, err := other.Create(ctx, "x", counter{7}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, "k5", counter{1}); err != nil { // in s's cache: most likely taken
			t.Fatal(err)
		}
		// The first member creates x unread (s's cache never met it: the
		// commit decides, and refuses it: x is 7).
		first := func(tx *etagstore.Tx[counter]) error { return tx.Create("x", counter{5}) }
		// The second reads x (the first member's 5, not stored) and creates
		// "k" and what it read.
		var saw []int
		second := func(tx *etagstore.Tx[counter]) error {
			c, err := tx.Get("x")
			if err != nil {
				return err
			}
			saw = append(saw, c.N)
			return tx.Create(fmt.Sprintf("k%d", c.N), counter{1})
		}
		e1, e2 := twoInOneBatch(t, h, s, first, second)
		wantOnly(t, "the first member's Create of a key another process made", e1, etagstore.ErrExists)
		if e2 != nil {
			t.Errorf("the second member = %v (its runs saw x = %v); want it to commit on the stored x, 7: x was never 5", e2, saw)
		}
		if _, err := s.Get(ctx, "k7"); err != nil {
			t.Errorf("k7: %v; want the second member's create", err)
		}
		if x, err := s.Get(ctx, "x"); err != nil || x.Value.N != 7 {
			t.Errorf("x = %+v, %v; want 7", x.Value, err)
		}
	})
}

// The same, the key looked up rather than predicted: the batch is wary
// (a commit refused on a key it did not look up came first), so the
// created key is read before the commit and the member answered at once.
func TestTxCreateExistsOnInheritedViewLookedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		other := etagstore.New[counter](h, nil)
		ctx := t.Context()
		for _, k := range []string{"x", "k5", "surprise"} {
			if _, err := other.Create(ctx, k, counter{7}); err != nil {
				t.Fatal(err)
			}
		}
		// A batch refused on a key it did not look up makes the group wary.
		e1, e2 := twoInOneBatch(t, h, s, increment("y"), createWithSide("surprise"))
		if e1 != nil || !errors.Is(e2, etagstore.ErrExists) {
			t.Fatalf("the surprise batch: %v, %v", e1, e2)
		}
		h.hold = make(chan struct{})
		first := func(tx *etagstore.Tx[counter]) error { return tx.Create("x", counter{5}) }
		var saw []int
		second := func(tx *etagstore.Tx[counter]) error {
			c, err := tx.Get("x")
			if err != nil {
				return err
			}
			saw = append(saw, c.N)
			return tx.Create(fmt.Sprintf("k%d", c.N), counter{1})
		}
		e1, e2 = twoInOneBatch(t, h, s, first, second)
		wantOnly(t, "the first member's Create of a key another process made", e1, etagstore.ErrExists)
		if e2 != nil {
			t.Errorf("the second member = %v (its runs saw x = %v); want it to commit on the stored x, 7: x was never 5", e2, saw)
		}
		if _, err := s.Get(ctx, "k7"); err != nil {
			t.Errorf("k7: %v; want the second member's create", err)
		}
	})
}

// A member that creates a key first, and only then reads an earlier
// member's write (the kanban create: the title's claim, then the board's
// count), did not choose the key on a view that may never exist: a key
// most likely taken is answered ErrExists as for any member, beside the
// batch's commit, and it commits nothing on its own (it ran on its own,
// and its own commit was refused, for every such collision before).
func TestTxCreateExistsBeforeInheritedViewFailsInBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		if _, err := s.Create(ctx, "claim", counter{1}); err != nil { // in s's cache: most likely taken
			t.Fatal(err)
		}
		second := func(tx *etagstore.Tx[counter]) error {
			if err := tx.Create("claim", counter{2}); err != nil {
				return err
			}
			return increment("board")(tx)
		}
		before := h.commits.Load()
		e1, e2 := twoInOneBatch(t, h, s, increment("board"), second)
		if e1 != nil {
			t.Errorf("the first member: %v", e1)
		}
		wantOnly(t, "the second member's Create of a key its Store made", e2, etagstore.ErrExists)
		// The holding transaction's commit and the batch's: nothing of the
		// second member's own.
		if n := h.commits.Load() - before; n != 2 {
			t.Errorf("%d commits, want 2 (the holding transaction's, the batch's)", n)
		}
		if b, err := s.Get(ctx, "board"); err != nil || b.Value.N != 1 {
			t.Errorf("board = %+v, %v; want 1", b.Value, err)
		}
	})
}
