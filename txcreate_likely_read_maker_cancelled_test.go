package etagstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// The caller making the shared read of the likely-taken keys
// (probes) is cancelled during it: it ends with its context's error; the
// others learn on their own: ErrExists for the keys that exist, a commit
// for the one another process deleted; none hangs.
func TestTxCreateLikelyReadMakerCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		who := make(chan int, 1)
		several := func(keys []string) bool { return len(keys) > 1 && slices.Contains(keys, "mine1") }
		b := &armedRead{lookedUp: &lookedUp{heldCommits: h}, match: several, answer: heldBy(who)}
		other := etagstore.New[counter](b, nil)
		s := etagstore.New[counter](b, nil)
		ctx := t.Context()
		for _, k := range []string{"mine1", "mine2", "gone"} {
			if _, err := s.Create(ctx, k, counter{100}); err != nil {
				t.Fatal(err)
			}
		}
		d, err := other.Get(ctx, "gone")
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Delete(ctx, "gone", d.ETag); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		b.armed.Store(true)
		fns := []func(tx *etagstore.Tx[counter]) error{increment("x"), createWithSide("mine1"), createWithSide("mine2"), createWithSide("gone")}
		errs := make([]error, len(fns))
		cancels := make([]context.CancelFunc, len(fns))
		for i, fn := range fns {
			cctx, cancel := context.WithCancel(context.WithValue(ctx, memberID{}, i))
			cancels[i] = cancel
			wg.Go(func() { _, errs[i] = s.Transact(cctx, fn) })
			synctest.Wait()
		}
		close(h.hold)
		first := <-who
		synctest.Wait()
		cancels[first]()
		wg.Wait()
		for _, c := range cancels {
			c()
		}
		t.Logf("the shared read was made by member %d", first)
		if !errors.Is(errs[first], context.Canceled) {
			t.Errorf("the cancelled member %d: %v, want context.Canceled", first, errs[first])
		}
		for i := 1; i <= 2; i++ {
			if i != first {
				wantOnly(t, "a Create of a key that exists", errs[i], etagstore.ErrExists)
			}
		}
		if first != 3 && errs[3] != nil {
			t.Errorf("a Create of a key another process deleted: %v", errs[3])
		}
		if errs[0] != nil {
			t.Errorf("the member creating nothing: %v", errs[0])
		}
	})
}
