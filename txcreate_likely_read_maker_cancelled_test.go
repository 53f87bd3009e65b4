package etagstore_test

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
)

// blockProbe is lookedUp whose first ReadMany of several keys among
// probed after arm reports its caller's id and waits for its context's end.
type blockProbe struct {
	*lookedUp
	armed atomic.Bool
	who   chan int
}

func (b *blockProbe) Abilities() driver.Abilities {
	a := b.lookedUp.Abilities()
	many := a.ReadMany
	a.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
		if len(keys) > 1 && slices.Contains(keys, "mine1") && b.armed.CompareAndSwap(true, false) {
			id, _ := ctx.Value(memberID{}).(int)
			b.who <- id
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return many(ctx, keys)
	}
	return a
}

// the caller making the shared read of the likely-taken keys
// (probes) is cancelled during it: it ends with its context's error; the
// others learn on their own: ErrExists for the keys that exist, a commit
// for the one another process deleted; none hangs.
func TestTxCreateLikelyReadMakerCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		b := &blockProbe{lookedUp: &lookedUp{heldCommits: h}, who: make(chan int, 1)}
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
		first := <-b.who
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
