package etagstore_test

// Regression tests from an adversarial review of the write engine: a
// member leaving a batch, and a 412 that answered a retry of a write that
// had landed.
import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"

	"github.com/etagstore/etagstore/driver"
)

type logDoc struct{ Log []string }

// The batch write lands but the answer is a plain 412 (a retry below the
// Store got it), which the engine itself handles via refusedLanded. In the
// window between the 412 and the read that finds the write, a member whose
// mutation the write holds gives up: it gets ctx.Err() (sending(false)
// cleared inFlight) although its mutation is committed.
func TestReviewRefusedButLandedLeaver(t *testing.T) {
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[logDoc](hb, nil)
	ctx := context.Background()
	if _, err := s.Create(ctx, "k", logDoc{}); err != nil { // write 1
		t.Fatal(err)
	}
	gate := make(chan struct{})
	lctx, lcancel := context.WithCancel(ctx)
	var armRead sync.Once
	armed := make(chan struct{})
	hb.writeHook = func(n int, key string, w driver.Write) (etagstore.ETag, error, bool) {
		switch n {
		case 2: // the solo caller's write: hold it until the batch has queued
			<-gate
		case 3: // the batch's write: it lands, the answer is a 412 to a retry
			if _, err := hb.Backend.Write(context.Background(), key, w); err != nil {
				t.Errorf("inner write: %v", err)
			}
			armRead.Do(func() { close(armed) })
			// A backend that sees its retry marks the refusal ambiguous (the
			// driver contract); a plain 412 is definite.
			return "", fmt.Errorf("%w: %w", driver.ErrAmbiguous, etagstore.ErrConflict), true
		}
		return "", nil, false
	}
	hb.afterRead = func(n int) {
		select {
		case <-armed:
			armRead = sync.Once{}
			armed = make(chan struct{}) // once
			lcancel()                   // L gives up now
			time.Sleep(5 * time.Millisecond)
		default:
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := s.Update(ctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "solo"); return nil }); err != nil {
			t.Errorf("solo: %v", err)
		}
	})
	time.Sleep(10 * time.Millisecond)
	var lerr, aerr error
	wg.Go(func() {
		_, lerr = s.Update(lctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "L"); return nil })
	})
	time.Sleep(2 * time.Millisecond)
	wg.Go(func() {
		_, aerr = s.Update(ctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "A"); return nil })
	})
	time.Sleep(10 * time.Millisecond)
	close(gate)
	wg.Wait()
	d, _ := s.Get(ctx, "k")
	t.Logf("stored %v; L: %v; A: %v", d.Value.Log, lerr, aerr)
	if slices.Contains(d.Value.Log, "L") && (errors.Is(lerr, context.Canceled)) {
		t.Errorf("L returned %v, but its mutation is stored: %v", lerr, d.Value.Log)
	}
}

// A batch member leaving (its own ctx) between its turn and the send vetoes the
// write; the veto consumes a retry attempt and, when attempts run out, every
// other member gets a *ConflictError although nobody else wrote the key.
func advVeto(t *testing.T, maxAttempts, leavers int) {
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[counter](hb, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: maxAttempts}})
	ctx := context.Background()
	if _, err := s.Create(ctx, "k", counter{}); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	hb.writeHook = func(n int, key string, w driver.Write) (etagstore.ETag, error, bool) {
		if n == 2 { // the solo caller's write
			<-gate
		}
		return "", nil, false
	}
	var wg sync.WaitGroup
	wg.Go(func() { // solo
		if _, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil }); err != nil {
			t.Errorf("solo: %v", err)
		}
	})
	time.Sleep(20 * time.Millisecond)
	cancels := make([]context.CancelFunc, leavers)
	for i := range leavers {
		lctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		wg.Go(func() {
			_, err := s.Update(lctx, "k", func(c *counter) error { c.N++; return nil })
			if !errors.Is(err, context.Canceled) && err != nil {
				t.Logf("leaver %d: %v", i, err)
			}
		})
		time.Sleep(2 * time.Millisecond)
	}
	var xerr, aerr error
	wg.Go(func() {
		_, aerr = s.Update(ctx, "k", func(c *counter) error { c.N++; return nil })
	})
	time.Sleep(2 * time.Millisecond)
	calls := 0
	wg.Go(func() {
		_, xerr = s.Update(ctx, "k", func(c *counter) error {
			if calls < leavers {
				cancels[calls]() // one more member gives up while the batch is being applied
				time.Sleep(3 * time.Millisecond)
			}
			calls++
			c.N++
			return nil
		})
	})
	time.Sleep(20 * time.Millisecond)
	close(gate)
	wg.Wait()
	if aerr != nil || xerr != nil {
		t.Errorf("members that did not give up: A=%v X=%v (X's mutate ran %d times); nobody else wrote the key", aerr, xerr, calls)
	}
}

func TestReviewVetoMaxAttempts1(t *testing.T) { advVeto(t, 1, 1) }
func TestReviewVetoDefault(t *testing.T)      { advVeto(t, 0, 10) }

// A write that lands but is answered with a plain 412 (a retry below the
// Store) is recognised by refusedLanded when the base was read — but not when
// the base was a cached (or chained) copy: the mutation is applied twice.
func advLandedPlain412(t *testing.T, cache int) {
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[counter](hb, &etagstore.Options{CacheSize: cache, DisableGroupCommit: false})
	ctx := context.Background()
	if _, err := s.Create(ctx, "k", counter{}); err != nil { // write 1 (cached)
		t.Fatal(err)
	}
	hb.writeHook = func(n int, key string, w driver.Write) (etagstore.ETag, error, bool) {
		if n == 2 {
			if _, err := hb.Backend.Write(context.Background(), key, w); err != nil {
				t.Errorf("inner: %v", err)
			}
			return "", etagstore.ErrConflict, true // the answer to the layer's retry
		}
		return "", nil, false
	}
	calls := 0
	d, err := s.Update(ctx, "k", func(c *counter) error { calls++; c.N++; return nil })
	got, _ := s.Get(ctx, "k")
	t.Logf("cache=%d: Update -> %+v, %v; mutate ran %d times; stored N=%d", cache, d.Value, err, calls, got.Value.N)
	if got.Value.N != 1 {
		t.Errorf("cache=%d: one Update, stored N=%d", cache, got.Value.N)
	}
}

func TestReviewLandedPlain412NoCache(t *testing.T) { advLandedPlain412(t, 0) }
func TestReviewLandedPlain412Cache(t *testing.T)   { advLandedPlain412(t, 8) }
