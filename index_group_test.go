package etagstore_test

// Indexes in group-commit batches (issue 44, section 3): a member whose
// state would take a held value fails alone, with a *UniqueError, including
// a value another member of the same batch takes earlier; the other
// members succeed.
import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// An Update batch on one key: one member renames the card to a title
// another card holds, the others add labels. Only the renaming member
// fails (*UniqueError naming the holder); the labels land.
func TestIndexGroupUpdateMemberFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		ctx := context.Background()
		hb := &commitCounting{hookBackend: &hookBackend{Backend: memstore.New(nil)}}
		cards := etagstore.New[card](hb, nil, byTitle, byLabel)
		if _, err := cards.Create(ctx, "k", card{Title: "mine"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cards.Create(ctx, "h", card{Title: "held"}); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		hb.writeHook = func(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			if role(ctx) == "solo" {
				<-gate
			}
			return "", nil, false
		}
		label := func(l string) func(*card) error {
			return func(c *card) error { c.Labels = append(c.Labels, l); return nil }
		}
		var wg sync.WaitGroup
		// solo changes the title's case, not its value (byTitle lowers
		// it): a plain write, held until gate, while the others queue.
		wg.Go(func() {
			if _, err := cards.Update(as(ctx, "solo"), "k", func(c *card) error { c.Title = "Mine"; return nil }); err != nil {
				t.Errorf("solo: %v", err)
			}
		})
		synctest.Wait()
		errs := map[string]error{}
		var mu sync.Mutex
		for _, name := range []string{"a", "rename", "b"} {
			wg.Go(func() {
				f := label(name)
				if name == "rename" {
					f = func(c *card) error { c.Title = "Held"; return nil }
				}
				_, err := cards.Update(ctx, "k", f)
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			})
			synctest.Wait()
		}
		writes := hb.writes
		close(gate)
		wg.Wait()
		t.Logf("stats after the gate: %d plain writes, %d commits", hb.writes-writes, hb.commits.Load())
		var ue *etagstore.UniqueError
		if !errors.As(errs["rename"], &ue) || ue.Key != "h" || ue.Value != "held" {
			t.Errorf("rename to a held title = %v, want a *UniqueError naming h", errs["rename"])
		}
		for _, name := range []string{"a", "b"} {
			if errs[name] != nil {
				t.Errorf("member %s (labels only) = %v, want success: only the renaming member fails", name, errs[name])
			}
		}
		d, err := cards.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Value.Title != "Mine" || !slices.Contains(d.Value.Labels, "a") || !slices.Contains(d.Value.Labels, "b") {
			t.Errorf("stored %+v, want title Mine and labels a, b", d.Value)
		}
		if h, err := cards.GetBy(ctx, byTitle, "held"); err != nil || h.Key != "h" {
			t.Errorf("GetBy(held) = %q, %v; want h", h.Key, err)
		}
		for _, l := range []string{"a", "b"} {
			var keys []string
			for d, err := range cards.ListBy(ctx, byLabel, l) {
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, d.Key)
			}
			if !slices.Equal(keys, []string{"k"}) {
				t.Errorf("ListBy(label %s) = %q, want [k]", l, keys)
			}
		}
	})
}

// heldTxCards is a Store of cards with indexes over a memstore whose
// commits of "hold" wait until hold is closed: transactions queued
// meanwhile go in one batch.
func heldTxCards(t *testing.T) (*etagstore.Store[card], *heldCommits) {
	h := newHeldCommits()
	return etagstore.New[card](h, nil, byTitle, byLabel), h
}

// Concurrent transactions of one batch: two create different cards with
// one title, two others create unrelated cards. Exactly one of the two
// succeeds and the other fails ErrExists (a *UniqueError); the unrelated
// ones succeed.
func TestIndexGroupTransactDuplicateFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		ctx := context.Background()
		s, h := heldTxCards(t)
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[card]) error { return tx.Put("hold", card{Title: "hold"}) }); err != nil {
				t.Errorf("the holding transaction: %v", err)
			}
		})
		synctest.Wait()
		create := func(key, title string) func(tx *etagstore.Tx[card]) error {
			return func(tx *etagstore.Tx[card]) error { return tx.Create(key, card{Title: title}) }
		}
		errs := map[string]error{}
		var mu sync.Mutex
		for _, m := range []struct{ key, title string }{{"u1", "other 1"}, {"d1", "dup"}, {"u2", "other 2"}, {"d2", "dup"}, {"u3", "other 3"}} {
			wg.Go(func() {
				_, err := s.Transact(ctx, create(m.key, m.title))
				mu.Lock()
				errs[m.key] = err
				mu.Unlock()
			})
			synctest.Wait()
		}
		before := h.commits.Load()
		close(h.hold)
		wg.Wait()
		t.Logf("%d commits after the hold was released", h.commits.Load()-before)
		for _, k := range []string{"u1", "u2", "u3"} {
			if errs[k] != nil {
				t.Errorf("unrelated create %s = %v, want success", k, errs[k])
			}
		}
		ok, dup := 0, 0
		for _, k := range []string{"d1", "d2"} {
			var ue *etagstore.UniqueError
			switch err := errs[k]; {
			case err == nil:
				ok++
			case errors.Is(err, etagstore.ErrExists) && errors.As(err, &ue) && ue.Value == "dup":
				dup++
			default:
				t.Errorf("create %s of a title its batch shares = %v, want success or a *UniqueError", k, err)
			}
		}
		if ok != 1 || dup != 1 {
			t.Errorf("of two creates of one title in one batch %d succeeded and %d failed with a *UniqueError, want 1 and 1 (%v, %v)", ok, dup, errs["d1"], errs["d2"])
		}
		holders := 0
		for _, k := range []string{"d1", "d2"} {
			if _, err := s.Get(ctx, k); err == nil {
				holders++
			}
		}
		if d, err := s.GetBy(ctx, byTitle, "dup"); holders != 1 || err != nil {
			t.Errorf("%d cards stored with the title; GetBy = %q, %v", holders, d.Key, err)
		}
	})
}

// A member of a transaction batch that takes a value held before the
// batch fails alone; the member before it in the batch that releases a
// value and the one after that takes the released value succeed.
func TestIndexGroupTransactHeldValueFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		ctx := context.Background()
		s, h := heldTxCards(t)
		close(h.hold)
		for k, title := range map[string]string{"a": "ta", "b": "tb"} {
			if _, err := s.Create(ctx, k, card{Title: title}); err != nil {
				t.Fatal(err)
			}
		}
		h.hold = make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[card]) error { return tx.Put("hold", card{Title: "hold"}) }); err != nil {
				t.Errorf("the holding transaction: %v", err)
			}
		})
		synctest.Wait()
		errs := map[string]error{}
		var mu sync.Mutex
		members := []struct {
			name string
			fn   func(tx *etagstore.Tx[card]) error
		}{
			{"rename a", func(tx *etagstore.Tx[card]) error { return tx.Put("a", card{Title: "ta2"}) }},  // releases ta
			{"take tb", func(tx *etagstore.Tx[card]) error { return tx.Create("c", card{Title: "tb"}) }}, // held by b
			{"take ta", func(tx *etagstore.Tx[card]) error { return tx.Create("d", card{Title: "ta"}) }}, // released earlier in the batch
		}
		for _, m := range members {
			wg.Go(func() {
				_, err := s.Transact(ctx, m.fn)
				mu.Lock()
				errs[m.name] = err
				mu.Unlock()
			})
			synctest.Wait()
		}
		close(h.hold)
		wg.Wait()
		var ue *etagstore.UniqueError
		if !errors.As(errs["take tb"], &ue) || ue.Key != "b" {
			t.Errorf("take tb = %v, want a *UniqueError naming b", errs["take tb"])
		}
		for _, n := range []string{"rename a", "take ta"} {
			if errs[n] != nil {
				t.Errorf("%s = %v, want success", n, errs[n])
			}
		}
		if d, err := s.GetBy(ctx, byTitle, "ta"); err != nil || d.Key != "d" {
			t.Errorf("GetBy(ta) = %q, %v; want d", d.Key, err)
		}
		if d, err := s.GetBy(ctx, byTitle, "tb"); err != nil || d.Key != "b" {
			t.Errorf("GetBy(tb) = %q, %v; want b", d.Key, err)
		}
	})
}

// commitCounting is a hookBackend that counts its commits.
type commitCounting struct {
	*hookBackend
	commits atomic.Int64
}

func (c *commitCounting) Abilities() driver.Abilities {
	a := c.hookBackend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		c.commits.Add(1)
		return commit(ctx, actions)
	}
	return a
}
