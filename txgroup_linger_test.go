package etagstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// slowCommits is memstore whose writes and commits take 8 ms of a
// synctest bubble's clock, recording when each began.
type slowCommits struct {
	driver.Backend
	start time.Time
	mu    sync.Mutex
	began []time.Duration
}

func (s *slowCommits) send() {
	s.mu.Lock()
	s.began = append(s.began, time.Since(s.start))
	s.mu.Unlock()
	time.Sleep(8 * time.Millisecond)
}

func (s *slowCommits) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	s.send()
	return s.Backend.Write(ctx, key, w)
}

func (s *slowCommits) Abilities() driver.Abilities {
	a := s.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		s.send()
		return commit(ctx, actions)
	}
	return a
}

// A batch of transactions waits, before it starts, for the callers the
// last batch answered to come back, and counts each caller once: one the
// batch answered before its commit (its created key most likely taken)
// that is queued again when the commit ends is not waited for twice. Two
// callers here: the next batch starts as soon as both are back, not at
// the linger's bound (a quarter of the last commit: 2 ms). Every
// time.Sleep is on the bubble's clock.
func TestTxBatchWaitsForEachCallerOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		sc := &slowCommits{Backend: memstore.New(nil)}
		s := etagstore.New[counter](sc, nil)
		ctx := context.Background()
		if _, err := s.Create(ctx, "mine", counter{}); err != nil { // in s's cache: most likely taken
			t.Fatal(err)
		}
		sc.start = time.Now()
		sc.began = nil
		var wg sync.WaitGroup
		wg.Go(func() { // t=0: alone, commits 0–8
			if _, err := s.Transact(ctx, increment("hold")); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		wg.Go(func() { // batch 1 at 8, then batch 2 (both back at 16)
			for range 2 {
				if _, err := s.Transact(ctx, increment("x")); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Go(func() { // answered in batch 1 before its commit: mine exists; queued again during it
			if _, err := s.Transact(ctx, createWithSide("mine")); !errors.Is(err, etagstore.ErrExists) {
				t.Errorf("Create of mine = %v, want ErrExists", err)
			}
			if _, err := s.Transact(ctx, increment("y")); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		want := []time.Duration{0, 8 * time.Millisecond, 16 * time.Millisecond}
		if !slices.Equal(sc.began, want) {
			t.Errorf("commits began at %v, want %v (the third at once, both callers back)", sc.began, want)
		}
	})
}
