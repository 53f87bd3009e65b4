package blobstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// leaseRequests counts, in a blob client's pipeline, the requests of a
// Locker by kind: lease actions (acquire, renew, release, …), metadata
// writes (the fencing token) and property reads.
type leaseRequests struct {
	mu     sync.Mutex
	counts map[string]int
}

func (r *leaseRequests) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	kind := raw.Method
	if a := raw.Header["x-ms-lease-action"]; len(a) == 1 { // set as is, not canonical
		kind = a[0]
	} else if raw.URL.Query().Get("comp") == "metadata" {
		kind = "metadata"
	}
	r.mu.Lock()
	r.counts[kind]++
	r.mu.Unlock()
	return req.Next()
}

// take returns the counts so far and starts again from zero.
func (r *leaseRequests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.counts
	r.counts = map[string]int{}
	return c
}

func countedContainer(t *testing.T) (*container.Client, *leaseRequests) {
	r := &leaseRequests{counts: map[string]int{}}
	return watchedContainer(t, "", azcore.ClientOptions{}, r), r
}

// queueGate reports, through a Locker's queue hook, each caller that got
// in line: in(n) returns once n callers are in line.
type queueGate struct{ lengths chan int }

func gateQueue(l *blobstore.Locker) queueGate {
	g := queueGate{lengths: make(chan int, 1024)}
	blobstore.SetQueueHook(l, func(_ string, n int) { g.lengths <- n })
	return g
}

func (g queueGate) in(t *testing.T, n int) {
	t.Helper()
	for {
		select {
		case got := <-g.lengths:
			if got == n {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d callers never got in line", n)
		}
	}
}

// lockOpts keeps a lease with its process for the whole test (Tenure), so
// that every handover is one.
var lockOpts = &blobstore.LockOptions{Tenure: time.Minute, PollInitial: 10 * time.Millisecond, PollMax: 100 * time.Millisecond}

// Callers of one Locker take the lock in the order they called Lock. Each
// is handed the lease by the holder before it, writing its own greater
// token under it in one request: no acquire, no refused try.
func TestLockHandsOverInOrder(t *testing.T) {
	ctx := t.Context()
	cc, reqs := countedContainer(t)
	l, err := blobstore.NewLocker(cc, lockOpts)
	if err != nil {
		t.Fatal(err)
	}
	gate := gateQueue(l)
	first, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	reqs.take()
	const waiters = 8
	var (
		mu    sync.Mutex
		order []int
		locks []*blobstore.Lock
		wg    sync.WaitGroup
	)
	for i := range waiters {
		wg.Go(func() {
			lk, err := l.Lock(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order, locks = append(order, i), append(locks, lk)
			mu.Unlock()
			if err := lk.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
		gate.in(t, i+1) // the next comes only once this one is in line
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("order %v, want 0 to %d in turn", order, waiters-1)
		}
	}
	last := first.Token()
	for i, lk := range locks {
		if lk.Token() <= last || lk.LeaseID() != first.LeaseID() {
			t.Fatalf("holder %d: token %d after %d, lease %s (first %s); want a greater token under the handed lease", i, lk.Token(), last, lk.LeaseID(), first.LeaseID())
		}
		last = lk.Token()
	}
	// One token write per handover, the release at the end; nothing else.
	want := map[string]int{"metadata": waiters, "release": 1}
	if got := reqs.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests %v, want %v", got, want)
	}
}

// A caller in line whose context ends leaves the line at once, with
// ErrLocked and its context's error, and the one behind it is handed the
// lock when the holder unlocks.
func TestLockCancelledWaiterLeavesTheLine(t *testing.T) {
	ctx := t.Context()
	l, err := blobstore.NewLocker(azuritetest.NewContainer(t), lockOpts)
	if err != nil {
		t.Fatal(err)
	}
	gate := gateQueue(l)
	holder, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	quitting, quit := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := l.Lock(quitting, "k")
		gaveUp <- err
	}()
	gate.in(t, 1)
	next := make(chan *blobstore.Lock, 1)
	go func() {
		lk, err := l.Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		next <- lk
	}()
	gate.in(t, 2)
	quit()
	if err := <-gaveUp; !errors.Is(err, etagstore.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled waiter's Lock = %v, want ErrLocked and context.Canceled", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk := <-next
	if lk == nil {
		t.Fatal("the waiter behind the cancelled one got no lock")
	}
	if lk.LeaseID() != holder.LeaseID() || lk.Token() <= holder.Token() {
		t.Errorf("handed lease %s token %d after lease %s token %d; want the same lease, a greater token", lk.LeaseID(), lk.Token(), holder.LeaseID(), holder.Token())
	}
	_ = lk.Unlock(ctx)
}

// A waiter whose context ends just as the holder hands it the lock (either
// may come first) passes the lock on: the next waiter gets it.
func TestLockCancelledAsItIsHandedTheLock(t *testing.T) {
	ctx := t.Context()
	l, err := blobstore.NewLocker(azuritetest.NewContainer(t), lockOpts)
	if err != nil {
		t.Fatal(err)
	}
	gate := gateQueue(l)
	for round := range 10 {
		holder, err := l.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		quitting, quit := context.WithCancel(ctx)
		first := make(chan error, 1)
		go func() {
			lk, err := l.Lock(quitting, "k")
			if err == nil {
				err = lk.Unlock(ctx) // it won the race: got the lock before it gave up
			}
			first <- err
		}()
		gate.in(t, 1)
		next := make(chan error, 1)
		go func() {
			lk, err := l.Lock(ctx, "k")
			if err == nil {
				err = lk.Unlock(ctx)
			}
			next <- err
		}()
		gate.in(t, 2)
		go quit()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: the cancelled waiter: %v", round, err)
		}
		if err := <-next; err != nil {
			t.Fatalf("round %d: the next waiter: %v", round, err)
		}
	}
}

// A holder whose lease was broken does not hand it over. Found by its
// renewal, the next caller in line acquires a fresh lease at once, before
// the lost holder unlocks; not found yet, the next caller's token write
// under the handed lease fails, and it acquires a fresh one. Either way
// the stale holder's writes are refused with ErrFenced once the new holder
// has written.
func TestLockLostIsNotHandedOver(t *testing.T) {
	for _, noticed := range []bool{true, false} {
		t.Run(fmt.Sprintf("noticed=%v", noticed), func(t *testing.T) {
			ctx := t.Context()
			opts := *lockOpts
			opts.RenewInterval = 200 * time.Millisecond
			if !noticed {
				opts.RenewInterval = 5 * time.Second
			}
			c := azuritetest.NewContainer(t)
			l, err := blobstore.NewLocker(c, &opts)
			if err != nil {
				t.Fatal(err)
			}
			s := etagstore.New[Note](blobstore.New(c, &blobstore.Options{Prefix: "docs/"}), nil)
			gate := gateQueue(l)
			holder, err := l.Lock(ctx, "report")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Create(holder.Context(), "report", Note{Text: "holder"}); err != nil {
				t.Fatal(err)
			}
			next := make(chan *blobstore.Lock, 1)
			go func() {
				lk, err := l.Lock(ctx, "report")
				if err != nil {
					t.Error(err)
				}
				next <- lk
			}()
			gate.in(t, 1)
			breaker, _ := blobstore.New(c, &blobstore.Options{Prefix: "locks/"}).BlobLease("report", "")
			if _, err := breaker.Break(ctx, 0); err != nil {
				t.Fatal(err)
			}
			var lk *blobstore.Lock
			if noticed {
				lk = <-next // before the holder unlocks
				if err := holder.Unlock(ctx); !errors.Is(err, etagstore.ErrLockLost) {
					t.Fatalf("Unlock of the lost lock = %v, want ErrLockLost", err)
				}
			} else {
				if err := holder.Unlock(ctx); err != nil {
					t.Fatalf("Unlock of a lock whose loss was not seen yet = %v", err)
				}
				lk = <-next
			}
			checkFreshHolder(t, c, s, holder, lk)
		})
	}
}

// checkFreshHolder checks that lk, which came after holder lost its lease,
// holds a fresh lease with a greater token, excludes another process, and
// fences holder's writes to the document report once it wrote it.
func checkFreshHolder(t *testing.T, c *container.Client, s *etagstore.Store[Note], holder, lk *blobstore.Lock) {
	t.Helper()
	ctx := t.Context()
	if lk == nil {
		t.Fatal("no lock for the next caller")
	}
	defer lk.Unlock(ctx)
	if lk.LeaseID() == holder.LeaseID() || lk.Token() <= holder.Token() {
		t.Fatalf("next holder: lease %s token %d after lease %s token %d; want a fresh lease and a greater token", lk.LeaseID(), lk.Token(), holder.LeaseID(), holder.Token())
	}
	other, _ := blobstore.NewLocker(c, nil)
	if _, err := other.TryLock(ctx, "report"); !errors.Is(err, etagstore.ErrLocked) {
		t.Fatalf("another process's TryLock while the next caller holds = %v, want ErrLocked", err)
	}
	if _, err := s.Update(lk.Context(), "report", func(n *Note) error { n.Text = "next"; return nil }); err != nil {
		t.Fatal(err)
	}
	stale := etagstore.WithFence(ctx, holder.Token())
	if _, err := s.Update(stale, "report", func(n *Note) error { n.Text = "stale"; return nil }); !errors.Is(err, etagstore.ErrFenced) {
		t.Fatalf("the stale holder's write = %v, want ErrFenced", err)
	}
}

// A handed-over lock fences as an acquired one does: once the next holder
// has written, the one before it is refused with ErrFenced.
func TestLockHandoverFences(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, lockOpts)
	if err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[Note](blobstore.New(c, &blobstore.Options{Prefix: "docs/"}), nil)
	gate := gateQueue(l)
	a, err := l.Lock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(a.Context(), "report", Note{Text: "A"}); err != nil {
		t.Fatal(err)
	}
	next := make(chan *blobstore.Lock, 1)
	go func() {
		lk, err := l.Lock(ctx, "report")
		if err != nil {
			t.Error(err)
		}
		next <- lk
	}()
	gate.in(t, 1)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-next
	if b == nil {
		t.FailNow()
	}
	defer b.Unlock(ctx)
	if a.Context().Err() == nil {
		t.Fatal("the first holder's context is live after its Unlock")
	}
	want, err := s.Update(b.Context(), "report", func(n *Note) error { n.Text = "B"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(etagstore.WithFence(ctx, a.Token()), "report", func(n *Note) error { n.Text = "A late"; return nil }); !errors.Is(err, etagstore.ErrFenced) {
		t.Fatalf("A's late write = %v, want ErrFenced", err)
	}
	if got, _ := s.Get(ctx, "report"); got != want {
		t.Fatalf("stored %+v, want B's %+v", got, want)
	}
}

// Many goroutines in a few Lockers (processes) take one lock over and
// over: never two inside at once, checked exactly by a count whose
// increments are a separate load and store (an overlap loses one), by the
// most holders seen inside, and by a document updated under every hold
// with the lock's fencing token; tokens strictly increase in hold order.
func TestLockNoOverlapUnderContention(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := azuritetest.NewContainer(t)
	s := etagstore.New[Note](blobstore.New(c, &blobstore.Options{Prefix: "docs/"}), nil)
	if _, err := s.Create(ctx, "count", Note{}); err != nil {
		t.Fatal(err)
	}
	const lockers, each, rounds = 4, 6, 5
	var (
		count, inside, most atomic.Int64
		mu                  sync.Mutex
		tokens              []int64
		wg                  sync.WaitGroup
	)
	// enter counts a holder in, and its hold: a separate load and store.
	enter := func(token int64) {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		v := count.Load()
		runtime.Gosched()
		count.Store(v + 1)
		mu.Lock()
		tokens = append(tokens, token)
		mu.Unlock()
	}
	for range lockers {
		l, err := blobstore.NewLocker(c, &blobstore.LockOptions{Tenure: 50 * time.Millisecond, PollInitial: 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for range each {
			wg.Go(func() {
				for range rounds {
					lk, err := l.Lock(ctx, "shared")
					if err != nil {
						t.Error(err)
						return
					}
					enter(lk.Token())
					if _, err := s.Update(lk.Context(), "count", func(n *Note) error { n.Text += "x"; return nil }); err != nil {
						t.Errorf("update under the lock: %v", err)
					}
					inside.Add(-1)
					if err := lk.Unlock(ctx); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	const total = lockers * each * rounds
	doc, err := s.Get(ctx, "count")
	if err != nil {
		t.Fatal(err)
	}
	if most.Load() != 1 || count.Load() != total || len(doc.Value.Text) != total {
		t.Fatalf("%d inside at most, count %d, document %d; want 1, %d, %d", most.Load(), count.Load(), len(doc.Value.Text), total, total)
	}
	checkIncreasing(t, tokens)
}

// checkIncreasing checks that tokens, in hold order, strictly increase.
func checkIncreasing(t *testing.T, tokens []int64) {
	t.Helper()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens not increasing in hold order at %d: %d after %d", i, tokens[i], tokens[i-1])
		}
	}
}

// A process whose callers want a lock all the time releases it at the end
// of each tenure: a caller in another process gets it.
func TestLockTenureLetsOtherProcessesIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := azuritetest.NewContainer(t)
	opts := &blobstore.LockOptions{Tenure: 50 * time.Millisecond, PollInitial: 10 * time.Millisecond, PollMax: 200 * time.Millisecond}
	busy, err := blobstore.NewLocker(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				lk, err := busy.Lock(ctx, "k")
				if err != nil {
					t.Error(err)
					return
				}
				_ = lk.Unlock(ctx)
			}
		})
	}
	other, err := blobstore.NewLocker(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		lk, err := other.Lock(ctx, "k")
		if err != nil {
			t.Fatalf("the other process never got the lock: %v", err)
		}
		_ = lk.Unlock(ctx)
	}
	close(stop)
	wg.Wait()
}

// Renewals leave the lock blob's ETag alone: a lease renewed while held is
// still handed over, not acquired anew.
func TestLockHandoverAfterRenewal(t *testing.T) {
	ctx := t.Context()
	tel := newSpanTelemetry(t)
	opts := *lockOpts
	opts.RenewInterval, opts.TracerProvider = 100*time.Millisecond, tel.tp
	l, err := blobstore.NewLocker(azuritetest.NewContainer(t), &opts)
	if err != nil {
		t.Fatal(err)
	}
	gate := gateQueue(l)
	a, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan *blobstore.Lock, 1)
	go func() {
		lk, err := l.Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		next <- lk
	}()
	gate.in(t, 1)
	select {
	case <-tel.renewed:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal")
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-next
	if b == nil {
		t.FailNow()
	}
	defer b.Unlock(ctx)
	if b.LeaseID() != a.LeaseID() || b.Token() <= a.Token() {
		t.Fatalf("after a renewal: lease %s token %d, after lease %s token %d; want the lease handed over, a greater token", b.LeaseID(), b.Token(), a.LeaseID(), a.Token())
	}
}
