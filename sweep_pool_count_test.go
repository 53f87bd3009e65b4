package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/memstore"
)

// failFirstDelete is a memstore whose deletes are held until DocsAtOnce
// of them are in flight; then the first to have come fails with err,
// applying nothing, and the others wait for release.
type failFirstDelete struct {
	driver.Backend
	err     error
	release chan struct{}
	full    chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *failFirstDelete) Abilities() driver.Abilities {
	a := b.Backend.Abilities()
	inner := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		if len(actions) == 0 || !actions[0].Delete {
			return inner(ctx, actions)
		}
		b.mu.Lock()
		b.n++
		first := b.n == 1
		if b.n == index.DocsAtOnce {
			close(b.full)
		}
		b.mu.Unlock()
		if first {
			<-b.full
			return nil, b.err
		}
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return inner(ctx, actions)
	}
	return a
}

// A pass whose one delete fails returns that error, and a count equal to
// the documents it did delete: those running when it failed finish and
// count, none is counted that stayed, and none starts after. The failing
// delete fails with DocsAtOnce deletes in flight; the others are let go
// only once every goroutine of the bubble is blocked (synctest): the pass
// has recorded the failure, and its producer stopped.
func TestSweepPoolCountsWhatFailedPassDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		clock := newFakeClock()
		boom := fmt.Errorf("%w: the disk is full", etagstore.ErrTooLarge)
		b := &failFirstDelete{Backend: memstore.New(nil), err: boom, release: make(chan struct{}), full: make(chan struct{})}
		s := etagstore.New[account](b, &etagstore.Options{Clock: clock}, etagstore.Expiry(func(a account) time.Time { return a.Until }))
		for i := range 30 {
			if _, err := s.Create(ctx, fmt.Sprintf("k%02d", i), account{Until: clock.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		clock.Sleep(ctx, time.Hour)
		var n int
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			n, err = s.Sweep(ctx)
		}()
		synctest.Wait() // the failure recorded; the others held
		close(b.release)
		<-done
		if !errors.Is(err, boom) {
			t.Fatalf("Sweep = %d, %v; want the failed delete's error", n, err)
		}
		gone := 0
		for i := range 30 {
			if _, err := b.Backend.Read(ctx, fmt.Sprintf("k%02d", i)); errors.Is(err, driver.ErrNotFound) {
				gone++
			}
		}
		if n != gone || gone != index.DocsAtOnce-1 {
			t.Errorf("Sweep counted %d, %d documents gone; want equal, %d (those in flight beside the failed one)", n, gone, index.DocsAtOnce-1)
		}
	})
}
