package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	var read func(context.Context, string) (Counter, error)
	var inc func(context.Context, string) (bool, error)
	if mode == "naive" {
		read, inc = e.naiveRead(space), e.naive(space)
	}
	var increments atomic.Int64
	var mu sync.Mutex
	var res result
	before := e.requests.n.Load()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range ycsbWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			zipf := rand.NewZipf(rng, ycsbSkew, 1, ycsbKeys-1)
			var attempts []int
			var lat []float64
			for time.Now().Before(deadline) {
				key := ycsbKey(zipf.Uint64())
				t0 := time.Now()
				tries, err := 1, error(nil)
				isRead := rng.IntN(2) == 0
				switch {
				case isRead && read != nil:
					_, err = read(ctx, key)
				case isRead:
					_, err = s.Get(ctx, key)
				case inc != nil:
					tries = 0
					for ok := false; !ok && err == nil; {
						tries++
						ok, err = inc(ctx, key)
					}
					increments.Add(1)
				default:
					tries = 0
					_, err = s.Update(ctx, key, func(c *Counter) error { tries++; c.N++; return nil })
					increments.Add(1)
				}
				if err != nil {
					log.Fatalf("%s ycsb %s: %v", e.name, mode, err)
				}
				attempts = append(attempts, tries)
				lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
			}
			mu.Lock()
			res.Commits += int64(len(attempts))
			res.Attempts = append(res.Attempts, attempts...)
			res.Latency = append(res.Latency, lat...)
			mu.Unlock()
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
	if total.Load() != increments.Load() {
		log.Fatalf("%s ycsb %s: counters sum to %d after %d increments", e.name, mode, total.Load(), increments.Load())
	}
	return res
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
