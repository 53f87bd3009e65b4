package etagstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// sharedReadSetup stores N=1 under "k", starts a Get whose read has
// returned N=1 from the backend but is held on a gate, and writes N=2
// behind the Store's back (another process). Gets called from then on
// must see N=2. It runs in a synctest bubble.
func sharedReadSetup(t *testing.T, opts *etagstore.Options) (s *etagstore.Store[counter], hb *hookBackend, release func() counter) {
	t.Helper()
	ctx := t.Context()
	gate := make(chan struct{})
	hb = &hookBackend{Backend: memstore.New(nil)}
	hb.afterRead = func(ctx context.Context, _ string, _ driver.Item, _ error) {
		if role(ctx) == "held" {
			<-gate
		}
	}
	s = etagstore.New[counter](hb, opts)
	created, err := s.Create(ctx, "k", counter{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan counter, 1)
	go func() {
		d, err := s.Get(as(ctx, "held"), "k")
		if err != nil {
			t.Error(err)
		}
		first <- d.Value
	}()
	synctest.Wait() // the first Get's read holds N=1, on the gate
	data, _ := etagstore.JSON.Marshal(counter{N: 2})
	if _, err := hb.Backend.Write(ctx, "k", driver.Write{Data: data, Cond: driver.IfMatch(created.ETag)}); err != nil {
		t.Fatal(err)
	}
	return s, hb, func() counter { close(gate); return <-first }
}

// Gets of one key that arrive while a read of it is in flight share the
// next read, sent once that read is answered: one read for all of them,
// and each sees the write that ended before it was called.
func TestGetsShareReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, hb, release := sharedReadSetup(t, nil)
		var wg sync.WaitGroup
		got := make([]etagstore.Doc[counter], 8)
		for i := range got {
			wg.Go(func() {
				var err error
				if got[i], err = s.Get(t.Context(), "k"); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait() // all eight wait behind the read in flight
		if hb.count() != 1 {
			t.Errorf("%d reads sent while one was in flight, want 1 (the callers must wait for it)", hb.count())
		}
		if first := release(); first.N != 1 {
			t.Errorf("the first Get saw N=%d, want 1 (its read was answered before the write)", first.N)
		}
		wg.Wait()
		for i, d := range got {
			if d.Value.N != 2 {
				t.Errorf("Get %d saw N=%d, want 2: it was called after the write ended", i, d.Value.N)
			}
		}
		if hb.count() != 2 {
			t.Errorf("%d reads for 9 Gets, want 2 (one in flight, one shared by the eight that waited)", hb.count())
		}
		got[0].Value.N = 100 // each caller has a value of its own
		if got[1].Value.N != 2 {
			t.Errorf("callers share a value: %d", got[1].Value.N)
		}
	})
}

// A waiting Get whose context ends returns its context's error alone; the
// others are still served, and a shared read nobody waits for any more is
// not sent.
func TestSharedReadWaiterLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _, release := sharedReadSetup(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		var leftErr, stayErr error
		var stay etagstore.Doc[counter]
		var wg sync.WaitGroup
		wg.Go(func() { _, leftErr = s.Get(ctx, "k") })
		wg.Go(func() { stay, stayErr = s.Get(t.Context(), "k") })
		synctest.Wait()
		cancel()
		synctest.Wait()
		if !errors.Is(leftErr, context.Canceled) {
			t.Errorf("the Get whose context ended returned %v, want context.Canceled", leftErr)
		}
		release()
		wg.Wait()
		if stayErr != nil || stay.Value.N != 2 {
			t.Errorf("the other Get: %+v, %v; want N=2", stay.Value, stayErr)
		}

		// Now one waits and leaves: its shared read is dropped unsent.
		s2, hb2, release2 := sharedReadSetup(t, nil)
		ctx2, cancel2 := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { _, err := s2.Get(ctx2, "k"); done <- err }()
		synctest.Wait()
		cancel2()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		release2()
		synctest.Wait()
		if hb2.count() != 1 {
			t.Errorf("%d reads, want 1: nobody waited for the shared read any more", hb2.count())
		}
	})
}

// With DisableGroupCommit, or a context carrying write state of its own
// (driver.Ungrouped: a lease), every Get reads on its own.
func TestGetsReadAloneWhenUngrouped(t *testing.T) {
	for _, c := range []struct {
		name string
		opts *etagstore.Options
		ctx  func(context.Context) context.Context
	}{
		{"DisableGroupCommit", &etagstore.Options{DisableGroupCommit: true}, func(ctx context.Context) context.Context { return ctx }},
		{"Ungrouped", nil, driver.Ungrouped},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, hb, release := sharedReadSetup(t, c.opts)
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						if d, err := s.Get(c.ctx(t.Context()), "k"); err != nil || d.Value.N != 2 {
							t.Errorf("Get: %+v, %v; want N=2", d.Value, err)
						}
					})
				}
				wg.Wait() // none waits for the read in flight
				if hb.count() != 5 {
					t.Errorf("%d reads, want 5: every Get reads on its own", hb.count())
				}
				release()
			})
		})
	}
}

// count returns how many reads h has answered.
func (h *hookBackend) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reads
}
