package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// docs/expiry.md, Sweep step 4: a commit whose answer is lost is sent
// again; a send that lands counts; a send refused after a lost answer
// ends the pass with that error, the document uncounted, and the next
// pass finds it gone.

// loseCommitAnswer loses the answer of the next Commit once armed:
// applied (the commit lands) or not, as apply says.
type loseCommitAnswer struct {
	driver.Backend
	armed atomic.Bool
	apply bool
}

func (b *loseCommitAnswer) Abilities() driver.Abilities {
	a := b.Backend.Abilities()
	inner := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		if b.armed.CompareAndSwap(true, false) {
			if b.apply {
				if _, err := inner(ctx, actions); err != nil {
					return nil, err
				}
			}
			return nil, fmt.Errorf("%w: the connection was reset", driver.ErrAmbiguous)
		}
		return inner(ctx, actions)
	}
	return a
}

func TestSweepLostAnswer(t *testing.T) {
	for _, apply := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", apply), func(t *testing.T) {
			ctx := t.Context()
			clock := newFakeClock()
			b := &loseCommitAnswer{Backend: memstore.New(nil), apply: apply}
			s := etagstore.New[account](b, &etagstore.Options{Clock: clock},
				etagstore.Expiry(func(a account) time.Time { return a.Until }))
			if _, err := s.Create(ctx, "k1", account{Until: clock.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			clock.Sleep(ctx, time.Minute+10*time.Second)
			b.armed.Store(true)
			n, err := s.Sweep(ctx)
			switch {
			case !apply && (err != nil || n != 1):
				t.Errorf("Sweep with one lost answer, not applied = %d, %v; want 1, nil (sent again, and the send landed)", n, err)
			case apply && (!errors.Is(err, driver.ErrAmbiguous) || n != 0):
				t.Errorf("Sweep with one lost answer, applied = %d, %v; want 0 and the lost answer's error (refused when sent again: who deleted it, no read can tell)", n, err)
			}
			if _, err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Backend.Read(ctx, "k1"); err == nil {
				t.Errorf("k1 still stored after two sweeps")
			}
		})
	}
}
