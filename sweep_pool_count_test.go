package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// failDeleteOf is a memstore whose commit deleting key fails with err,
// applying nothing; the deletes of the others are held until it has
// failed (so several are in flight when the pool fails).
type failDeleteOf struct {
	driver.Backend
	key    string
	err    error
	failed chan struct{}
}

func (b *failDeleteOf) Abilities() driver.Abilities {
	a := b.Backend.Abilities()
	inner := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		for _, x := range actions {
			if x.Delete && x.Key == b.key {
				close(b.failed)
				return nil, b.err
			}
		}
		if len(actions) > 0 && actions[0].Delete {
			select {
			case <-b.failed:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return inner(ctx, actions)
	}
	return a
}

// A pass whose one delete fails returns that error, and a count equal to
// the documents it did delete: those running when it failed finish and
// count, none is counted that stayed, and none starts after (at most
// DocsAtOnce-1 others were running).
func TestSweepPoolCountsWhatFailedPassDeleted(t *testing.T) {
	ctx := t.Context()
	clock := newFakeClock()
	boom := fmt.Errorf("%w: the disk is full", etagstore.ErrTooLarge)
	b := &failDeleteOf{Backend: memstore.New(nil), key: "k00", err: boom, failed: make(chan struct{})}
	s := etagstore.New[account](b, &etagstore.Options{Clock: clock}, etagstore.Expiry(func(a account) time.Time { return a.Until }))
	for i := range 30 {
		if _, err := s.Create(ctx, fmt.Sprintf("k%02d", i), account{Until: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Sleep(ctx, time.Hour)
	n, err := s.Sweep(ctx)
	if !errors.Is(err, boom) {
		t.Fatalf("Sweep = %d, %v; want the failed delete's error", n, err)
	}
	gone := 0
	for i := range 30 {
		if _, err := b.Backend.Read(ctx, "k"+strconv.Itoa(i/10)+strconv.Itoa(i%10)); errors.Is(err, driver.ErrNotFound) {
			gone++
		}
	}
	if n != gone || gone > 7 {
		t.Errorf("Sweep counted %d, %d documents gone; want equal, at most %d", n, gone, 7)
	}
}
