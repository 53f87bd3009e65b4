package etagstore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// laggyBackend is slowBackend (store_test.go) with reads as slow as its
// writes, as a service across a network is, and both counted. It runs in
// a synctest bubble only: the delay is on the bubble's fake clock and
// models latency; it steers no goroutine.
type laggyBackend struct {
	slowBackend
	reads, writes *atomic.Int64
}

func newLaggy(b driver.Backend, rtt time.Duration) laggyBackend {
	return laggyBackend{slowBackend: slowBackend{b, rtt}, reads: new(atomic.Int64), writes: new(atomic.Int64)}
}

func (l laggyBackend) Read(ctx context.Context, key string) (driver.Item, error) {
	l.reads.Add(1)
	time.Sleep(l.delay)
	return l.Backend.Read(ctx, key)
}

func (l laggyBackend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	l.writes.Add(1)
	return l.slowBackend.Write(ctx, key, w)
}

// Four Stores (four processes) of four goroutines each increment one key
// for 8 s over a 10 ms round trip. A Store whose batches chain from the
// version it wrote wins every race — the others must read first — so
// without turns one Store keeps the key for the whole run while the others
// starve (4 commits each, their longest Update the whole run). With turns
// each Store commits a share (at least 1/16 of the commits), and no Update
// waits 5 s: the first holder probes for rivals after 128 writes (1.3 s),
// and from then on the Stores take turns of 100 ms (in 300 runs the
// longest Update was 1.6–3.4 s). Time is the bubble's: the figures do not
// depend on the machine's speed.
func TestHotKeyTurnsAcrossProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		const procs, writers = 4, 4
		commits, longest := hotKeyProcesses(t, procs, writers, 8*time.Second, nil, func(s *etagstore.Store[counter], _ int) error {
			_, err := s.Update(t.Context(), "hot", func(c *counter) error { c.N++; return nil })
			return err
		})
		total := 0
		for _, n := range commits {
			total += n
		}
		if least := slices.Min(commits); least < total/16 {
			t.Errorf("a Store committed %d of %d: starved (a fair share is %d)", least, total, total/procs)
		}
		if longest > 5*time.Second {
			t.Errorf("longest Update took %v, want under 5 s of the 8 s run", longest)
		}
	})
}

// A lone Store streaming Updates on a key nobody else writes pauses only
// to probe for rivals, less and less often: over 250 writes of 10 ms
// (4 goroutines, batches of 4), once, after 128 writes, for 30 ms. With
// turns taken as for a key with rivals (every 5 writes) it would pause 40
// times.
func TestHotKeyTurnsCostALoneWriterLittle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		lb := newLaggy(memstore.New(nil), 10*time.Millisecond)
		s := etagstore.New[counter](lb, nil)
		ctx := t.Context()
		if _, err := s.Create(ctx, "hot", counter{}); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 250 {
					if _, err := s.Update(ctx, "hot", func(c *counter) error { c.N++; return nil }); err != nil {
						t.Errorf("Update: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(began)
		reads, writes := time.Duration(lb.reads.Load()), time.Duration(lb.writes.Load())
		t.Logf("1000 increments: %d writes, %d reads, %v", writes, reads, took)
		if paused := took - (writes+reads)*10*time.Millisecond; paused > 40*time.Millisecond {
			t.Errorf("1000 uncontended increments took %v: %v more than their %d writes and %d reads, want at most one pause of 30 ms", took, paused, writes, reads)
		}
	})
}

// hotKeyProcesses runs procs Stores (standing for processes, with o) over
// one memstore, each behind 10 ms of latency a request, with writers
// goroutines each calling write (its index) on "hot" until d has passed
// on the bubble's clock. It checks the counter against the writes that
// succeeded and returns each Store's count and the longest write.
func hotKeyProcesses(t *testing.T, procs, writers int, d time.Duration, o *etagstore.Options, write func(s *etagstore.Store[counter], w int) error) ([]int, time.Duration) {
	t.Helper()
	mem := memstore.New(nil)
	ctx := t.Context()
	if _, err := etagstore.New[counter](mem, nil).Create(ctx, "hot", counter{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(d)
	var mu sync.Mutex
	commits := make([]int, procs)
	var longest time.Duration
	var wg sync.WaitGroup
	for p := range procs {
		s := etagstore.New[counter](newLaggy(mem, 10*time.Millisecond), o)
		for w := range writers {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					began := time.Now()
					if err := write(s, w); err != nil {
						t.Errorf("write: %v", err)
						return
					}
					mu.Lock()
					commits[p]++
					longest = max(longest, time.Since(began))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	doc, err := etagstore.New[counter](mem, nil).Get(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range commits {
		total += n
	}
	t.Logf("commits per Store %v (total %d), longest write %v", commits, total, longest)
	if doc.Value.N != total {
		t.Fatalf("counter %d after %d commits", doc.Value.N, total)
	}
	if it, err := mem.Read(ctx, "hot"); err != nil || strings.Contains(string(it.Data), "y=") {
		t.Errorf("stored %s (%v): the turns' marks belong in the bookkeeping, not the data", it.Data, err)
	}
	return commits, longest
}
