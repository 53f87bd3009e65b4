package blobstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

func newLocker(t *testing.T, opts *blobstore.LockOptions) (*blobstore.Locker, *blobstore.Backend) {
	t.Helper()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l, blobstore.New(c, &blobstore.Options{Prefix: "docs/"})
}

func TestLockerOptions(t *testing.T) {
	c := azuritetest.NewContainer(t)
	for _, o := range []blobstore.LockOptions{
		{LeaseDuration: 10 * time.Second},
		{LeaseDuration: blobstore.Infinite},
		{LeaseDuration: 15 * time.Second, RenewInterval: 8 * time.Second},
	} {
		if _, err := blobstore.NewLocker(c, &o); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("NewLocker(%+v) = %v, want ErrInvalidInput", o, err)
		}
	}
}

// 8 goroutines, each with a Locker of its own as a process would have,
// take the same lock repeatedly: never two holders at once, and every
// acquisition's token is greater than all before it. Each holder stays
// inside until another's acquire was refused while it held the lock (or
// nobody else wants it): the exclusion by the service is exercised on
// every hold.
func TestLockMutualExclusion(t *testing.T) {
	c := newContention()
	cc := watchedContainer(t, "", azcore.ClientOptions{}, c)
	const workers, rounds = 8, 3
	lockers := make([]*blobstore.Locker, workers)
	for i := range lockers {
		var err error
		if lockers[i], err = blobstore.NewLocker(cc, &blobstore.LockOptions{PollInitial: 10 * time.Millisecond, PollMax: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu     sync.Mutex
		tokens []int64
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, l := range lockers {
		wg.Go(func() {
			for range rounds {
				c.waitingForLock(+1)
				lk, err := l.Lock(ctx, "shared")
				c.waitingForLock(-1)
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				c.enter()
				mu.Lock()
				tokens = append(tokens, lk.Token())
				mu.Unlock()
				c.hold(ctx)
				c.leave()
				if err := lk.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			}
		})
	}
	wg.Wait()
	t.Log(c)
	if c.maxHolders != 1 {
		t.Fatalf("%d holders at once, want 1", c.maxHolders)
	}
	if len(tokens) != workers*rounds {
		t.Fatalf("%d acquisitions, want %d", len(tokens), workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens not increasing in acquisition order: %v", tokens)
		}
	}
}

func TestTryLockAndUnlock(t *testing.T) {
	ctx := t.Context()
	l, _ := newLocker(t, nil)
	a, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "k"); !errors.Is(err, etagstore.ErrLocked) {
		t.Fatalf("TryLock while held = %v, want ErrLocked", err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "k"); !errors.Is(err, etagstore.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline = %v, want ErrLocked and DeadlineExceeded", err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock = %v, want nil", err)
	}
	if a.Context().Err() == nil {
		t.Fatal("the lock's context is still live after Unlock")
	}
	b, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if b.Token() <= a.Token() || b.LeaseID() == a.LeaseID() {
		t.Fatalf("second acquisition: token %d (first %d), lease %s (first %s); want a greater token and a fresh lease id", b.Token(), a.Token(), b.LeaseID(), a.LeaseID())
	}
	if _, err := l.TryLock(ctx, "bad\x00key"); !errors.Is(err, etagstore.ErrInvalidKey) {
		t.Fatalf("TryLock(bad key) = %v, want ErrInvalidKey", err)
	}
	_ = b.Unlock(ctx)
}

// Breaking the lease under a holder is noticed by its next renewal: the
// context is cancelled with ErrLockLost and Lost is closed.
func TestLockLostSignal(t *testing.T) {
	ctx := t.Context()
	l, b := newLocker(t, &blobstore.LockOptions{RenewInterval: 200 * time.Millisecond})
	lk, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	breaker, err := blobstore.New(b.Container(), &blobstore.Options{Prefix: "locks/"}).BlobLease("k", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := breaker.Break(ctx, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock did not notice its lease was broken")
	}
	if !errors.Is(lk.Err(), etagstore.ErrLockLost) || !errors.Is(context.Cause(lk.Context()), etagstore.ErrLockLost) {
		t.Fatalf("Err = %v, Cause = %v; want ErrLockLost", lk.Err(), context.Cause(lk.Context()))
	}
	if err := lk.Unlock(ctx); !errors.Is(err, etagstore.ErrLockLost) {
		t.Fatalf("Unlock after loss = %v, want ErrLockLost", err)
	}
	// The lock is free again for others.
	other, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("TryLock after the break: %v", err)
	}
	_ = other.Unlock(ctx)
}

// Fencing: holder A stalls, its lease is taken over (here: broken, as an
// expiry would), B acquires and writes; A's late write carrying its older
// token is refused and B's write stands.
func TestLockFencing(t *testing.T) {
	ctx := t.Context()
	l, docs := newLocker(t, &blobstore.LockOptions{LeaseDuration: 60 * time.Second})
	s := etagstore.New[Note](docs, nil)
	if _, err := s.Create(ctx, "report", Note{Text: "start"}); err != nil {
		t.Fatal(err)
	}
	a, err := l.TryLock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(a.Context(), "report", func(n *Note) error { n.Text = "A1"; return nil }); err != nil {
		t.Fatal(err)
	}
	// A stalls (a GC pause, say) and does not see the loss; its lease is broken.
	staleCtx := etagstore.WithFence(ctx, a.Token())
	breaker, _ := blobstore.New(docs.Container(), &blobstore.Options{Prefix: "locks/"}).BlobLease("report", "")
	if _, err := breaker.Break(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// B is another process: its Locker knows nothing of A's lock.
	other, err := blobstore.NewLocker(docs.Container(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := other.TryLock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if bl.Token() <= a.Token() {
		t.Fatalf("B's token %d is not above A's %d", bl.Token(), a.Token())
	}
	bDoc, err := s.Update(bl.Context(), "report", func(n *Note) error { n.Text = "B"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(staleCtx, "report", func(n *Note) error { n.Text = "A2 (late)"; return nil })
	if !errors.Is(err, etagstore.ErrFenced) {
		t.Fatalf("A's late write = %v, want ErrFenced", err)
	}
	got, _ := s.Get(ctx, "report")
	if got != bDoc {
		t.Fatalf("stored %+v, want B's write %+v", got, bDoc)
	}
	_ = bl.Unlock(ctx)
	_ = a.Unlock(ctx)
}

// The "designated blob per table" pattern: a blob lock guards updates of a
// table entity, with the lock's fencing token carried into the table.
func TestLockGuardsTableUpdate(t *testing.T) {
	ctx := t.Context()
	l, _ := newLocker(t, &blobstore.LockOptions{PollInitial: 10 * time.Millisecond, PollMax: 100 * time.Millisecond})
	type Balance struct{ Amount int64 }
	tbl := tablestore.NewStore[Balance](azuritetest.NewTable(t), &tablestore.Options{Partition: "accounts"}, nil)
	if _, err := tbl.Create(ctx, "acme", Balance{}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 5
	var wg sync.WaitGroup
	var holders, overlap atomic.Int32
	for range workers {
		wg.Go(func() {
			for range each {
				lk, err := l.Lock(ctx, "tables/accounts")
				if err != nil {
					t.Error(err)
					return
				}
				if holders.Add(1) > 1 {
					overlap.Add(1)
				}
				// Under the lock a plain read-then-replace is safe.
				d, err := tbl.Get(lk.Context(), "acme")
				if err == nil {
					d.Value.Amount += 10
					_, err = tbl.Replace(lk.Context(), d)
				}
				if err != nil {
					t.Errorf("guarded update: %v", err)
				}
				holders.Add(-1)
				_ = lk.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	d, err := tbl.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if overlap.Load() != 0 || d.Value.Amount != workers*each*10 {
		t.Fatalf("amount %d with %d overlaps, want %d and 0", d.Value.Amount, overlap.Load(), workers*each*10)
	}
}

// Under dropped responses and 503s the lock still never has two holders.
// As in TestLockMutualExclusion, each goroutine has a Locker of its own,
// and each holder stays inside until another's acquire was refused while
// it held the lock, or nobody else wants it.
func TestLockUnderFaults(t *testing.T) {
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Blob"), storetest.DefaultFaults)
	c := newContention()
	cc := watchedContainer(t, proxy.URL(), azuritetest.FastRetries, c)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var acquired, failed atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		l, err := blobstore.NewLocker(cc, &blobstore.LockOptions{PollInitial: 10 * time.Millisecond, PollMax: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range 4 {
				c.waitingForLock(+1)
				lk, err := l.Lock(ctx, "shared")
				c.waitingForLock(-1)
				if err != nil {
					failed.Add(1) // an injected fault surfaced; not a safety problem
					continue
				}
				acquired.Add(1)
				c.enter()
				c.hold(ctx)
				c.leave()
				_ = lk.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d failed attempts, faults %v; %v", acquired.Load(), failed.Load(), proxy.Counts(), c)
	if c.maxHolders > 1 {
		t.Fatalf("%d holders at once", c.maxHolders)
	}
	if acquired.Load() == 0 {
		t.Fatal("the lock was never acquired")
	}
}

// Lock on a held key with a context that is already cancelled, or that ends
// while it waits, fails with an error matching both ErrLocked and the
// context's error, as its doc says.
func TestLockGivesUpWithItsContext(t *testing.T) {
	l, _ := newLocker(t, nil)
	held, err := l.Lock(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(t.Context())
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Lock(cancelled, "k"); !errors.Is(err, etagstore.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Errorf("Lock(held, cancelled context) = %v, want ErrLocked and context.Canceled", err)
	}
	short, cancel2 := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel2()
	if _, err := l.Lock(short, "k"); !errors.Is(err, etagstore.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock(held, deadline) = %v, want ErrLocked and context.DeadlineExceeded", err)
	}
}

// A Locker and a Store without a prefix on one container (as docs/blobs-and-locking.md's
// lock example has them): the Store's List never yields a lock blob and
// never fails on one.
func TestStoreListSkipsLockBlobs(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Lock(ctx, "invoice-42")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	s := blobstore.NewStore[Note](c, nil, nil)
	if _, err := s.Create(ctx, "invoice-42", Note{Text: "due"}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for d, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		keys = append(keys, d.Key)
	}
	if len(keys) != 1 || keys[0] != "invoice-42" {
		t.Fatalf("List = %q, want only the document invoice-42", keys)
	}
}
