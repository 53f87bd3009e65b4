package blobstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

type Note struct {
	Text string
	N    int
}

func newNotes(t *testing.T) (*etagstore.Store[Note], *blobstore.Backend) {
	t.Helper()
	b := blobstore.New(azuritetest.NewContainer(t), nil)
	return etagstore.New[Note](b, nil), b
}

func TestLeaseOperations(t *testing.T) {
	ctx := t.Context()
	s, b := newNotes(t)
	d, err := s.Create(ctx, "n", Note{Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := b.BlobLease("n", "")
	other, _ := b.BlobLease("n", "")

	for _, bad := range []time.Duration{0, 10 * time.Second, 61 * time.Second, 15*time.Second + time.Millisecond} {
		if err := a.Acquire(ctx, bad); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Acquire(%v) = %v, want ErrInvalidInput", bad, err)
		}
	}
	if err := a.Acquire(ctx, 15*time.Second); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := other.Acquire(ctx, 15*time.Second); !errors.Is(err, etagstore.ErrLocked) {
		t.Fatalf("second Acquire = %v, want ErrLocked", err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}

	// Writes: without the lease id 412 LeaseIdMissing is ErrLocked, never a
	// conflict to retry; with it they go through.
	_, err = s.Update(ctx, "n", func(n *Note) error { n.N++; return nil })
	if !errors.Is(err, etagstore.ErrLocked) || errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("Update of a leased blob without the lease = %v, want ErrLocked only", err)
	}
	d.Value.Text = "blind"
	if _, err := s.Replace(ctx, d); !errors.Is(err, etagstore.ErrLocked) {
		t.Fatalf("Replace of a leased blob = %v, want ErrLocked", err)
	}
	if err := s.Delete(ctx, "n", etagstore.ETagAny); !errors.Is(err, etagstore.ErrLocked) {
		t.Fatalf("Delete of a leased blob = %v, want ErrLocked", err)
	}
	leased := blobstore.WithLease(ctx, a.ID())
	d2, err := s.Update(leased, "n", func(n *Note) error { n.N++; return nil })
	if err != nil || d2.Value.N != 1 {
		t.Fatalf("Update with the lease = %+v, %v", d2, err)
	}
	// Exclusive read: a read with another lease id is refused.
	if _, err := s.Get(blobstore.WithLease(ctx, other.ID()), "n"); !errors.Is(err, etagstore.ErrLockLost) {
		t.Fatalf("Get with a wrong lease id = %v, want ErrLockLost", err)
	}
	if _, err := s.Get(leased, "n"); err != nil {
		t.Fatalf("Get with the lease id: %v", err)
	}

	// Change the id: the old id no longer works, the new one does.
	newID := blobstore.NewLeaseID()
	oldID := a.ID()
	if err := a.Change(ctx, newID); err != nil || a.ID() != newID {
		t.Fatalf("Change = %v (id %s)", err, a.ID())
	}
	if _, err := s.Update(blobstore.WithLease(ctx, oldID), "n", func(n *Note) error { n.N++; return nil }); !errors.Is(err, etagstore.ErrLockLost) {
		t.Fatalf("Update with the old lease id = %v, want ErrLockLost", err)
	}
	if _, err := s.Update(blobstore.WithLease(ctx, newID), "n", func(n *Note) error { n.N++; return nil }); err != nil {
		t.Fatalf("Update with the changed lease id: %v", err)
	}

	// Release, then the other handle acquires at once; releasing twice is lost.
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := a.Release(ctx); !errors.Is(err, etagstore.ErrLockLost) {
		t.Fatalf("second Release = %v, want ErrLockLost", err)
	}
	if err := other.Acquire(ctx, blobstore.Infinite); err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}

	// Break: an infinite lease breaks at once with period 0; renew then fails.
	if left, err := a.Break(ctx, 0); err != nil || left != 0 {
		t.Fatalf("Break = %v, %v", left, err)
	}
	if err := other.Renew(ctx); !errors.Is(err, etagstore.ErrLockLost) {
		t.Fatalf("Renew after break = %v, want ErrLockLost", err)
	}
	if _, err := a.Break(ctx, 61*time.Second); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Break(61s) = %v, want ErrInvalidInput", err)
	}
}

// A lease whose holder stops renewing expires after its period: then another
// can acquire, unleased writes succeed, and the old holder's renew fails.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, b := newNotes(t)
	if _, err := s.Create(ctx, "n", Note{}); err != nil {
		t.Fatal(err)
	}
	a, _ := b.BlobLease("n", "")
	if err := a.Acquire(ctx, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	if _, err := s.Update(ctx, "n", func(n *Note) error { n.N++; return nil }); !errors.Is(err, etagstore.ErrLocked) {
		t.Fatalf("Update while leased = %v, want ErrLocked", err)
	}
	// The one sleep kept in these tests: the lease must really expire on
	// the server, whose clock no test can move. Break would end it at once,
	// but a broken lease is another state (renew then fails with
	// LeaseIsBrokenAndCannotBeRenewed; see TestLeaseOperations), not the
	// expiry this test is about. 15 s after the acquisition, plus a second
	// for the server's clock.
	time.Sleep(time.Until(acquired.Add(16 * time.Second)))
	if _, err := s.Update(ctx, "n", func(n *Note) error { n.N++; return nil }); err != nil {
		t.Fatalf("Update after expiry: %v", err)
	}
	c, _ := b.BlobLease("n", "")
	if err := c.Acquire(ctx, 15*time.Second); err != nil {
		t.Fatalf("Acquire after expiry: %v", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, etagstore.ErrLockLost) {
		t.Fatalf("old holder's Renew = %v, want ErrLockLost", err)
	}
	if err := a.Release(ctx); !errors.Is(err, etagstore.ErrLockLost) {
		t.Fatalf("old holder's Release = %v, want ErrLockLost", err)
	}
}

func TestContainerLeaseGuardsDeletion(t *testing.T) {
	ctx := t.Context()
	_, b := newNotes(t)
	cl, err := b.ContainerLease("")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Acquire(ctx, blobstore.Infinite); err != nil {
		t.Fatal(err)
	}
	_, err = b.Container().Delete(ctx, nil)
	if err == nil {
		t.Fatal("deleting a leased container without the lease succeeded")
	}
	if !bloberror.HasCode(err, bloberror.LeaseIDMissing) {
		t.Fatalf("Delete = %v, want LeaseIdMissing", err)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Leased and unleased Updates racing on one key are never committed
// together: each is judged by its own lease id.
func TestLeasedWritesAreNotGrouped(t *testing.T) {
	ctx := t.Context()
	s, b := newNotes(t)
	if _, err := s.Create(ctx, "n", Note{}); err != nil {
		t.Fatal(err)
	}
	l, _ := b.BlobLease("n", "")
	if err := l.Acquire(ctx, blobstore.Infinite); err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	var leasedOK, unleasedOK atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			wctx := ctx
			if i%2 == 0 {
				wctx = blobstore.WithLease(ctx, l.ID())
			}
			_, err := s.Update(wctx, "n", func(n *Note) error { n.N++; return nil })
			switch {
			case err == nil && i%2 == 0:
				leasedOK.Add(1)
			case err == nil:
				unleasedOK.Add(1)
			case i%2 == 0 || !errors.Is(err, etagstore.ErrLocked):
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	d, err := s.Get(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if unleasedOK.Load() != 0 || leasedOK.Load() != 8 || d.Value.N != 8 {
		t.Fatalf("%d leased and %d unleased Updates succeeded, N = %d; want 8, 0, 8", leasedOK.Load(), unleasedOK.Load(), d.Value.N)
	}
}
