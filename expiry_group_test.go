package etagstore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

type hits struct {
	N     int
	Until time.Time
}

// Adversarial: group commit on an expired key. N concurrent Updates with
// CreateIfMissing over the expired document start the count from the
// zero value once and lose no increment; N concurrent Creates over it
// succeed exactly once, the others ErrExists.
func TestExpiryGroupCommitOverExpired(t *testing.T) {
	ctx := t.Context()
	clock := newFakeClock()
	s := etagstore.New[hits](memstore.New(nil), &etagstore.Options{Clock: clock},
		etagstore.Expiry(func(h hits) time.Time { return h.Until }))
	for _, k := range []string{"u", "c"} {
		if _, err := s.Create(ctx, k, hits{N: 100, Until: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, k); err != nil { // cached
			t.Fatal(err)
		}
	}
	clock.Sleep(ctx, time.Minute)
	until := clock.Now().Add(time.Hour)
	const n = 16
	gate := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, exists := 0, 0
	for range n {
		wg.Go(func() {
			<-gate
			_, err := s.Update(ctx, "u", func(h *hits) error { h.N++; h.Until = until; return nil }, etagstore.CreateIfMissing())
			if err != nil {
				t.Errorf("Update: %v", err)
			}
		})
		wg.Go(func() {
			<-gate
			_, err := s.Create(ctx, "c", hits{N: 1, Until: until})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, etagstore.ErrExists):
				exists++
			default:
				t.Errorf("Create: %v", err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if d, err := s.Get(ctx, "u"); err != nil || d.Value.N != n {
		t.Errorf("u = %+v, %v; want N %d (from the zero value)", d.Value, err, n)
	}
	if created != 1 || exists != n-1 {
		t.Errorf("Creates over the expired c: %d created, %d ErrExists; want 1 and %d", created, exists, n-1)
	}
}
