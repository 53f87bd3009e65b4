package etagstore_test

// Group commit of Updates: a first caller whose mutate blocks beyond
// groupcommit.SlotTimeout while others queue. The queued callers must be
// served by a runner without waiting for it, and the first caller's
// mutation must land exactly once when (if) its mutate returns; a first
// caller whose ctx ended meanwhile must get ctx.Err() and write nothing.
import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

func countIn(log []string, s string) int {
	n := 0
	for _, x := range log {
		if x == s {
			n++
		}
	}
	return n
}

func TestGroupedUpdateBlockedFirstCallerQueueServedAndLandsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		s := etagstore.New[logDoc](memstore.New(nil), nil)
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", logDoc{}); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		entered := make(chan struct{})
		var firstRuns atomic.Int32
		var wg sync.WaitGroup
		var firstDoc etagstore.Doc[logDoc]
		var firstErr error
		wg.Go(func() {
			firstDoc, firstErr = s.Update(ctx, "k", func(d *logDoc) error {
				if firstRuns.Add(1) == 1 {
					close(entered)
					<-gate
				}
				d.Log = append(d.Log, "first")
				return nil
			})
		})
		<-entered
		done := make(chan etagstore.Doc[logDoc], 10)
		for i := range 10 {
			wg.Go(func() {
				d, err := s.Update(ctx, "k", func(d *logDoc) error {
					d.Log = append(d.Log, fmt.Sprint(i))
					return nil
				})
				if err != nil {
					t.Errorf("queued %d: %v", i, err)
				}
				done <- d
			})
		}
		// Every queued caller returns while the first caller's mutate is
		// still blocked (the bubble's clock runs past SlotTimeout).
		for range 10 {
			d := <-done
			if countIn(d.Value.Log, "first") != 0 {
				t.Errorf("a queued caller's state holds the blocked first caller's mutation: %v", d.Value.Log)
			}
		}
		close(gate)
		wg.Wait()
		if firstErr != nil {
			t.Fatalf("first caller: %v", firstErr)
		}
		if countIn(firstDoc.Value.Log, "first") != 1 || len(firstDoc.Value.Log) != 11 {
			t.Errorf("first caller's state: %v", firstDoc.Value.Log)
		}
		got, err := s.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Value.Log) != 11 || countIn(got.Value.Log, "first") != 1 {
			t.Errorf("stored log %v: want the 10 queued and first once", got.Value.Log)
		}
		for i := range 10 {
			if countIn(got.Value.Log, fmt.Sprint(i)) != 1 {
				t.Errorf("%d appears %d times in %v", i, countIn(got.Value.Log, fmt.Sprint(i)), got.Value.Log)
			}
		}
		if got.Value.Log[len(got.Value.Log)-1] != "first" {
			t.Errorf("first caller's mutation should be last (it ran again on the runner's write): %v", got.Value.Log)
		}
	})
}

func TestGroupedUpdateBlockedFirstCallerCanceledWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		s := etagstore.New[logDoc](memstore.New(nil), nil)
		ctx := context.Background()
		if _, err := s.Create(ctx, "k", logDoc{}); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		entered := make(chan struct{})
		fctx, fcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var firstErr error
		var once sync.Once
		wg.Go(func() {
			_, firstErr = s.Update(fctx, "k", func(d *logDoc) error {
				once.Do(func() { close(entered); <-gate })
				d.Log = append(d.Log, "first")
				return nil
			})
		})
		<-entered
		done := make(chan struct{}, 5)
		for i := range 5 {
			wg.Go(func() {
				if _, err := s.Update(ctx, "k", func(d *logDoc) error {
					d.Log = append(d.Log, fmt.Sprint(i))
					return nil
				}); err != nil {
					t.Errorf("queued %d: %v", i, err)
				}
				done <- struct{}{}
			})
		}
		for range 5 {
			<-done
		}
		fcancel()
		close(gate)
		wg.Wait()
		if !errors.Is(firstErr, context.Canceled) {
			t.Errorf("first caller: %v, want context.Canceled", firstErr)
		}
		got, _ := s.Get(ctx, "k")
		if countIn(got.Value.Log, "first") != 0 || len(got.Value.Log) != 5 {
			t.Errorf("stored %v", got.Value.Log)
		}
		// The key is still usable, grouped.
		if _, err := s.Update(ctx, "k", func(d *logDoc) error { d.Log = append(d.Log, "after"); return nil }); err != nil {
			t.Fatal(err)
		}
		got, _ = s.Get(ctx, "k")
		if !slices.Contains(got.Value.Log, "after") {
			t.Errorf("stored %v", got.Value.Log)
		}
	})
}
