package tablestore_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// heldTable is a tablestore Backend whose write of a key ending in "hold"
// waits for hold: the one-key transaction that writes it holds the
// Store's queue, so that callers arriving meanwhile go in one batch.
type heldTable struct {
	*tablestore.Backend
	mu       sync.Mutex
	hold     chan struct{}
	entered  chan struct{}
	commits  atomic.Int64
	loseNext atomic.Bool // the next commit holding a delete lands, and its answer is lost
}

func (h *heldTable) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	if strings.HasSuffix(key, "hold") {
		h.mu.Lock()
		hold, entered := h.hold, h.entered
		h.mu.Unlock()
		entered <- struct{}{}
		<-hold
	}
	return h.Backend.Write(ctx, key, w)
}

func (h *heldTable) Abilities() driver.Abilities {
	a := h.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		h.commits.Add(1)
		etags, err := commit(ctx, actions)
		for _, ac := range actions {
			if ac.Delete && err == nil && h.loseNext.CompareAndSwap(true, false) {
				return nil, errors.New("connection reset after the transaction landed")
			}
		}
		return etags, err
	}
	return a
}

func newHeldTable(t *testing.T, partition string) *heldTable {
	var o *tablestore.Options
	if partition != "" {
		o = &tablestore.Options{Partition: partition}
	}
	return &heldTable{Backend: tablestore.New(azuritetest.NewTable(t), o)}
}

// waitInTransact waits until n goroutines wait in a transaction group's
// queue (or for their batch): polled, without sleeping.
func waitInTransact(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	buf := make([]byte, 8<<20)
	for time.Now().Before(deadline) {
		m := runtime.Stack(buf, true)
		stacks := string(buf[:m])
		if strings.Count(stacks, ").awaitFirst(")+strings.Count(stacks, ").awaitResult(") >= n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d callers never queued", n)
}

// inOneBatch runs hold (a Transact writing the hold key), and members
// once all of them are queued behind it: they go in one batch.
func inOneBatch(t *testing.T, h *heldTable, hold func(), members ...func()) {
	t.Helper()
	h.mu.Lock()
	h.hold, h.entered = make(chan struct{}), make(chan struct{}, 1)
	release := h.hold
	entered := h.entered
	h.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(hold)
	<-entered
	for i, m := range members {
		wg.Go(m)
		waitInTransact(t, 1+i) // queued in this order (the holder commits on its own)
	}
	close(release)
	wg.Wait()
}

func incTask(key string) func(tx *etagstore.Tx[Task]) error {
	return func(tx *etagstore.Tx[Task]) error {
		v, err := tx.Get(key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		v.N++
		return tx.Put(key, v)
	}
}

func holdTask(t *testing.T, s *etagstore.Store[Task], key string) func() {
	return func() {
		if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[Task]) error { return tx.Upsert(key, Task{}) }); err != nil {
			t.Errorf("hold: %v", err)
		}
	}
}
