package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etagstore/etagstore"
)

// The YCSB workload F scenario (read-modify-write, skewed): ycsbWorkers
// goroutines run operations on ycsbKeys keys, chosen with a zipfian
// distribution of exponent ycsbSkew (key 0 the hottest), for the cell's
// duration: half are reads, half increments. Modes:
//
//   - naive: the raw SDK read; the increment is the loop a user writes
//     today (read, write with If-Match, start again at once on 412);
//   - library: Store.Get and Store.Update with the default options (group
//     commit and the version cache on);
//   - library-nocache: the same without the version cache.
//
// Every cell ends with the keys' counters summed and checked against the
// increments that succeeded (exactly once); the run fails otherwise. A
// result's commits are all operations, reads included.
const (
	ycsbKeys    = 1000
	ycsbWorkers = 32
	ycsbSkew    = 1.1
)

func ycsbKey(i uint64) string { return fmt.Sprintf("user%04d", i) }

func ycsbRows(ctx context.Context, e *env, backend string, d time.Duration) []row {
	name := fmt.Sprintf("YCSB-F, %d writers, %d keys zipfian %.1f, 50%% reads", ycsbWorkers, ycsbKeys, ycsbSkew)
	if e.naiveRead == nil || !strings.Contains(name, only) {
		return nil
	}
	var rows []row
	for _, mode := range []string{"naive", "library", "library-nocache"} {
		r := ycsbCell(ctx, e, mode, "y"+strings.ReplaceAll(mode, "-", ""), d)
		rows = append(rows, row{name, mode, r})
		fmt.Fprintf(os.Stderr, "%s / %s / %s: %.0f ops/s\n", backend, name, mode, float64(r.Commits)/r.Seconds)
	}
	return rows
}

// ycsbCell seeds the keys of space, runs the workload for d in one mode
// and checks the counters.
func ycsbCell(ctx context.Context, e *env, mode, space string, d time.Duration) result {
	s := e.store(space, mode)
	seed(func(i uint64) error {
		_, err := s.Upsert(ctx, ycsbKey(i), Counter{Note: "etagbench ycsb"})
		return err
	})
	w := &ycsbWorkload{s: s, fail: func(err error) { log.Fatalf("%s ycsb %s: %v", e.name, mode, err) }}
	if mode == "naive" {
		w.read, w.inc = e.naiveRead(space), e.naive(space)
	}
	var mu sync.Mutex
	var res result
	before := e.requests.n.Load()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range ycsbWorkers {
		wg.Go(func() {
			// The label tells the modes apart in etagbench -cpuprofile.
			pprof.Do(ctx, pprof.Labels("mode", mode), func(ctx context.Context) {
				attempts, lat := w.run(ctx, uint64(i), start, deadline)
				mu.Lock()
				res.add(attempts, lat)
				mu.Unlock()
			})
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Requests = e.requests.n.Load() - before
	var total atomic.Int64
	seed(func(i uint64) error {
		doc, err := s.Get(ctx, ycsbKey(i))
		total.Add(doc.Value.N)
		return err
	})
	if total.Load() != w.increments.Load() {
		log.Fatalf("%s ycsb %s: counters sum to %d after %d increments", e.name, mode, total.Load(), w.increments.Load())
	}
	return res
}

// ycsbWorkload is one cell's operations: the raw SDK's read and increment
// (naive), or else the Store's Get and Update.
type ycsbWorkload struct {
	s          *etagstore.Store[Counter]
	read       func(context.Context, string) (Counter, error)
	inc        func(context.Context, string) (bool, error) // one attempt: false on 412
	fail       func(error)
	increments atomic.Int64
}

// run is one goroutine's operations until deadline, with the attempts and
// the latency (ms) of each.
func (w *ycsbWorkload) run(ctx context.Context, id uint64, start, deadline time.Time) (attempts []int, lat []float64) {
	rng := rand.New(rand.NewPCG(id, uint64(start.UnixNano())))
	zipf := rand.NewZipf(rng, ycsbSkew, 1, ycsbKeys-1)
	for time.Now().Before(deadline) {
		key := ycsbKey(zipf.Uint64())
		t0 := time.Now()
		var tries int
		var err error
		if rng.IntN(2) == 0 {
			tries, err = 1, w.get(ctx, key)
		} else {
			tries, err = w.increment(ctx, key)
		}
		if err != nil {
			w.fail(err)
		}
		attempts = append(attempts, tries)
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	return attempts, lat
}

func (w *ycsbWorkload) get(ctx context.Context, key string) error {
	var err error
	if w.read != nil {
		_, err = w.read(ctx, key)
	} else {
		_, err = w.s.Get(ctx, key)
	}
	return err
}

// increment adds one to key's counter and returns the attempts it took.
func (w *ycsbWorkload) increment(ctx context.Context, key string) (tries int, err error) {
	defer w.increments.Add(1)
	if w.inc == nil {
		_, err = w.s.Update(ctx, key, func(c *Counter) error { tries++; c.N++; return nil })
		return tries, err
	}
	for ok := false; !ok && err == nil; {
		tries++
		ok, err = w.inc(ctx, key)
	}
	return tries, err
}

// seed calls f for every key index, 16 at a time.
func seed(f func(i uint64) error) {
	var wg sync.WaitGroup
	next := atomic.Uint64{}
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < ycsbKeys; i = next.Add(1) - 1 {
				if err := f(i); err != nil {
					log.Fatalf("ycsb seed %s: %v", ycsbKey(i), err)
				}
			}
		})
	}
	wg.Wait()
}
