package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// markFailing is a memstore whose commits that mark events sent (they
// create a sent record, ".s.") fail with err once armed; failed is
// closed at the first such failure.
type markFailing struct {
	driver.Backend
	armed  atomic.Bool
	err    error
	once   sync.Once
	failed chan struct{}
	marks  atomic.Int32
}

func newMarkFailing(err error) *markFailing {
	return &markFailing{Backend: memstore.New(nil), err: err, failed: make(chan struct{})}
}

func (m *markFailing) Abilities() driver.Abilities {
	a := m.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		for _, x := range actions {
			if strings.Contains(x.Key, ".s.") {
				m.marks.Add(1)
				if m.armed.Load() {
					m.once.Do(func() { close(m.failed) })
					return nil, m.err
				}
				break
			}
		}
		return commit(ctx, actions)
	}
	return a
}

var relaySentinels = []error{etagstore.ErrNotFound, etagstore.ErrStorageNotFound, etagstore.ErrExists, etagstore.ErrConflict,
	etagstore.ErrETagRequired, etagstore.ErrInvalidKey, etagstore.ErrTooLarge, etagstore.ErrInvalidInput, etagstore.ErrFenced,
	etagstore.ErrLocked, etagstore.ErrLockLost, etagstore.ErrOutcomeUnknown, etagstore.ErrUnavailable}

// 40 events; the mark of 1..32 fails (storage gone) while event 33's
// publish is held, then 33's publish fails (unavailable). RelayOnce
// returns 0 marked and one failure: an error that matches one sentinel.
// No later mark is sent after the failed one.
func TestRelayOnceMarkAndPublishFailErrorMatchesOneSentinel(t *testing.T) {
	ctx := t.Context()
	b := newMarkFailing(fmt.Errorf("%w: the table is gone", etagstore.ErrStorageNotFound))
	docs := etagstore.New[struct{ N int }](b, nil)
	ob := etagstore.NewOutbox[orderPlaced](b, nil)
	emitOrders(t, docs, ob, 40)
	b.armed.Store(true)
	n, err := ob.RelayOnce(ctx, func(_ context.Context, ev etagstore.Event[orderPlaced]) error {
		if ev.Seq == 33 {
			<-b.failed // the mark of 1..32 has failed
			return fmt.Errorf("%w: the queue is busy", etagstore.ErrUnavailable)
		}
		return nil
	})
	if n != 0 || err == nil {
		t.Fatalf("RelayOnce = %d, %v; want 0 and an error", n, err)
	}
	var matched []error
	for _, s := range relaySentinels {
		if errors.Is(err, s) {
			matched = append(matched, s)
		}
	}
	if len(matched) != 1 {
		t.Errorf("RelayOnce's error %q matches %v: want exactly one sentinel (the first failure)", err, matched)
	}
	if got := b.marks.Load(); got != 1 {
		t.Errorf("%d mark commits sent, want 1 (none after the failed one)", got)
	}
}
