package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/etagstore/etagstore/blobstore"
)

// The locks scenario (blob): goroutines take one lock over and over, with
// an empty critical section, for the cell's duration. Modes:
//
//   - lease: the raw lease loop a user writes — AcquireLease with a fresh
//     lease id, on 409 a jittered exponential backoff from 25 ms to 1 s
//     (reset after each acquisition), ReleaseLease; no fencing token;
//   - locker: blobstore.Locker with its defaults (Lock, Unlock).
//
// Scenarios: 16 goroutines in one process, and 4 processes × 4 goroutines
// (worker processes, as the hot-key scenario's). Each cell reports locks/s
// and its ratio to lease in the same repetition, requests per lock (every
// request: lock blob and all), Jain's fairness index over the goroutines'
// lock counts ((Σx)²/(n·Σx²), 1 when all got as many), and the time spent
// waiting in Lock (p50, p99, max). Every hold is recorded as an interval
// of the wall clock (shared by the processes of this machine): a cell in
// which two intervals overlap fails the run.
//
//	scripts/with-azurite go run ./cmd/etagbench -backends blob -only locks -d 5s -lockreps 5
//
// -locks=false leaves the scenario out.

// lockReps is how many times each locks cell runs, modes interleaved.
var lockReps = flag.Int("lockreps", 1, "repetitions of each locks cell (min/median/max printed when more than 1)")

// clientOptions are the options of e's clients: its counting transport.
func (e *env) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{Transport: e.requests, Retry: policy.RetryOptions{RetryDelay: 20 * time.Millisecond}}
}

// lockStartEnv passes a locks cell's worker processes the wall-clock time
// (Unix ns) at which they all start.
const lockStartEnv = "ETAGBENCH_LOCK_START"

// runLocks (-locks) runs the locks scenario on blob storage.
var runLocks = flag.Bool("locks", true, "run the locks scenario (blob backend; filtered by -only like the others)")

// lockTenure sets LockOptions.Tenure of the locker mode (0: the default).
var lockTenure = flag.Duration("locktenure", 0, "LockOptions.Tenure of the locks scenario's locker mode (0: the default)")

// lockResult is one locks cell, or one worker process's share of it.
type lockResult struct {
	PerWorker []int64    `json:"per_worker"` // locks each goroutine took
	Waits     []float64  `json:"waits"`      // ms in Lock, per lock
	Holds     [][2]int64 `json:"holds"`      // [in, out] wall clock ns, per lock
	Requests  int64      `json:"requests"`
	Seconds   float64    `json:"seconds"`
}

func (r *lockResult) add(o lockResult) {
	r.PerWorker = append(r.PerWorker, o.PerWorker...)
	r.Waits = append(r.Waits, o.Waits...)
	r.Holds = append(r.Holds, o.Holds...)
	r.Requests += o.Requests
	r.Seconds = max(r.Seconds, o.Seconds)
}

func (r lockResult) locks() int64 {
	var n int64
	for _, x := range r.PerWorker {
		n += x
	}
	return n
}

// jain is Jain's fairness index of the per-goroutine lock counts.
func (r lockResult) jain() float64 {
	var sum, sq float64
	for _, x := range r.PerWorker {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(r.PerWorker)) * sq)
}

// overlaps returns how many holds began before the one before them ended.
func (r lockResult) overlaps() int {
	h := slices.Clone(r.Holds)
	sort.Slice(h, func(i, j int) bool { return h[i][0] < h[j][0] })
	n := 0
	for i := 1; i < len(h); i++ {
		if h[i][0] < h[i-1][1] {
			n++
		}
	}
	return n
}

// lockScenario is one row group of the locks table.
type lockScenario struct {
	name           string
	procs, writers int // writers per process
}

var lockModes = []string{"lease", "locker"}

// benchLocks runs the locks scenario on blob storage and prints its table.
func benchLocks(e *env, d time.Duration) {
	if !*runLocks {
		return
	}
	scens := []lockScenario{{"locks, 1 process × 16", 1, 16}, {"locks, 4 processes × 4", 4, 4}}
	type cellKey struct{ scen, mode string }
	results := map[cellKey][]lockResult{}
	var order []lockScenario
	for i, sc := range scens {
		if !strings.Contains(sc.name, only) {
			continue
		}
		order = append(order, sc)
		for rep := range max(*lockReps, 1) {
			for _, m := range lockModes {
				space := fmt.Sprintf("l%d%s%d", i, m, rep)
				var r lockResult
				if sc.procs > 1 {
					r = lockProcesses(e.conn, "blob/locks-"+m+"/"+space+"/"+e.resource, sc.procs, d)
				} else {
					r = lockCell(e, m, space, sc.writers, d)
				}
				if n := r.overlaps(); n > 0 {
					log.Fatalf("%s / %s: %d holds overlapped the one before", sc.name, m, n)
				}
				results[cellKey{sc.name, m}] = append(results[cellKey{sc.name, m}], r)
				fmt.Fprintf(os.Stderr, "blob / %s / %s: %.0f locks/s, per goroutine %v\n", sc.name, m, float64(r.locks())/r.Seconds, r.PerWorker)
			}
		}
	}
	if len(order) == 0 {
		return
	}
	fmt.Printf("## blob locks\n\n%d repetition(s) of %s per cell, modes interleaved; min / median / max over the repetitions.\n\n", max(*lockReps, 1), d)
	fmt.Println("| scenario | mode | locks/s | × lease | requests/lock | Jain fairness | p50 wait ms | p99 wait ms | max wait ms | holds overlapping |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, sc := range order {
		raw := results[cellKey{sc.name, "lease"}]
		for _, m := range lockModes {
			rs := results[cellKey{sc.name, m}]
			stat := func(f func(i int, r lockResult) float64) string {
				v := make([]float64, len(rs))
				for i, r := range rs {
					v[i] = f(i, r)
				}
				return spread(v)
			}
			total := 0
			for _, r := range rs {
				total += len(r.Holds)
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | none (%d holds) |\n", sc.name, m,
				stat(func(_ int, r lockResult) float64 { return float64(r.locks()) / r.Seconds }),
				stat(func(i int, r lockResult) float64 {
					return float64(r.locks()) / r.Seconds / (float64(raw[i].locks()) / raw[i].Seconds)
				}),
				stat(func(_ int, r lockResult) float64 { return float64(r.Requests) / float64(max(r.locks(), 1)) }),
				stat(func(_ int, r lockResult) float64 { return r.jain() }),
				stat(func(_ int, r lockResult) float64 { return pct(r.Waits, 50) }),
				stat(func(_ int, r lockResult) float64 { return pct(r.Waits, 99) }),
				stat(func(_ int, r lockResult) float64 { return slices.Max(append(r.Waits, 0)) }),
				total)
		}
	}
	fmt.Println()
}

// spread renders min / median / max, or the one value.
func spread(v []float64) string {
	s := slices.Clone(v)
	sort.Float64s(s)
	f := func(x float64) string {
		if x >= 100 {
			return fmt.Sprintf("%.0f", x)
		}
		return fmt.Sprintf("%.2f", x)
	}
	if len(s) == 1 {
		return f(s[0])
	}
	return f(s[0]) + " / " + f(s[len(s)/2]) + " / " + f(s[len(s)-1])
}

// lockCell runs writers goroutines of one process on the lock of space in
// mode for d.
func lockCell(e *env, mode, space string, writers int, d time.Duration) lockResult {
	ctx := context.Background()
	cc, err := containerFor(e.conn, e.clientOptions(), e.resource)
	if err != nil {
		log.Fatal(err)
	}
	take := lockTaker(ctx, cc, mode, space)
	var (
		mu     sync.Mutex
		res    lockResult
		inside atomic.Int32
		wg     sync.WaitGroup
	)
	before := e.requests.n.Load()
	start := time.Now()
	if at, err := strconv.ParseInt(os.Getenv(lockStartEnv), 10, 64); err == nil {
		// A worker process: start with the others, whenever each got here.
		time.Sleep(time.Until(time.Unix(0, at)))
		start = time.Now()
	}
	deadline := start.Add(d)
	for range writers {
		wg.Go(func() {
			var waits []float64
			var holds [][2]int64
			for time.Now().Before(deadline) {
				t0 := time.Now()
				unlock := take()
				in := time.Now()
				if inside.Add(1) != 1 {
					log.Fatalf("blob %s %s: two holders at once", mode, space)
				}
				inside.Add(-1)
				out := time.Now()
				unlock()
				waits = append(waits, float64(in.Sub(t0).Microseconds())/1000)
				holds = append(holds, [2]int64{in.UnixNano(), out.UnixNano()})
			}
			mu.Lock()
			res.add(lockResult{PerWorker: []int64{int64(len(waits))}, Waits: waits, Holds: holds})
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Requests = e.requests.n.Load() - before
	return res
}

// lockTaker returns a function that takes the lock of space in mode and
// returns the function that releases it; failures end the run.
func lockTaker(ctx context.Context, cc *container.Client, mode, space string) func() (unlock func()) {
	key := space + "-hot"
	switch mode {
	case "lease":
		bc := cc.NewBlockBlobClient("rawlocks/" + key)
		if _, err := bc.UploadBuffer(ctx, nil, nil); err != nil && !bloberror.HasCode(err, bloberror.LeaseIDMissing) {
			log.Fatal(err)
		}
		return func() func() { return rawLease(ctx, bc) }
	case "locker":
		l, err := blobstore.NewLocker(cc, &blobstore.LockOptions{Tenure: *lockTenure})
		if err != nil {
			log.Fatal(err)
		}
		return func() func() {
			lk, err := l.Lock(ctx, key)
			if err != nil {
				log.Fatalf("Lock: %v", err)
			}
			return func() {
				if err := lk.Unlock(ctx); err != nil {
					log.Fatalf("Unlock: %v", err)
				}
			}
		}
	}
	log.Fatalf("unknown lock mode %q", mode)
	return nil
}

// rawLease is the hand-written lease loop: a fresh lease id, AcquireLease
// until it is granted, backing off 25 ms to 1 s with full jitter.
func rawLease(ctx context.Context, bc *blockblob.Client) func() {
	id := blobstore.NewLeaseID()
	lc, err := lease.NewBlobClient(bc, &lease.BlobClientOptions{LeaseID: &id})
	if err != nil {
		log.Fatal(err)
	}
	delay := 25 * time.Millisecond
	for {
		_, err := lc.AcquireLease(ctx, 15, nil)
		if err == nil {
			break
		}
		if !bloberror.HasCode(err, bloberror.LeaseAlreadyPresent) {
			log.Fatalf("AcquireLease: %v", err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(delay))) + 1)
		delay = min(2*delay, time.Second)
	}
	return func() {
		if _, err := lc.ReleaseLease(ctx, nil); err != nil {
			log.Fatalf("ReleaseLease: %v", err)
		}
	}
}

// lockProcesses runs procs worker processes of 4 goroutines each on one
// lock (spec: blob/locks-MODE/space/container).
func lockProcesses(conn, spec string, procs int, d time.Duration) lockResult {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var total lockResult
	var wg sync.WaitGroup
	// The workers start together, a while after they are launched.
	at := strconv.FormatInt(time.Now().Add(time.Second).UnixNano(), 10)
	for range procs {
		wg.Go(func() {
			cmd := exec.Command(self, "-d", d.String(), "-locktenure", lockTenure.String(), "-worker", spec)
			cmd.Env = append(os.Environ(), "ETAGSTORE_AZURITE="+conn, lockStartEnv+"="+at)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				log.Fatalf("lock worker: %v", err)
			}
			var r lockResult
			if err := json.Unmarshal(out, &r); err != nil {
				log.Fatalf("lock worker output: %v", err)
			}
			mu.Lock()
			total.add(r)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// runLockWorker is one process of a multi-process locks cell: 4 goroutines
// on the lock of space; it prints its result as JSON.
func runLockWorker(e *env, mode, space string, d time.Duration) {
	r := lockCell(e, strings.TrimPrefix(mode, "locks-"), space, 4, d)
	_ = json.NewEncoder(os.Stdout).Encode(r)
}
