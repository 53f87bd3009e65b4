package blobstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// slowRenewals keeps a lock's renewals from running during a test: the
// loss must be found by Unlock, not by the renewal loop.
var slowRenewals = &blobstore.LockOptions{LeaseDuration: 60 * time.Second, RenewInterval: 29 * time.Second}

// checkLostAtUnlock checks the error of an Unlock that found its lock
// lost: it matches ErrLockLost and no other sentinel, prints as one line,
// and the lock reports the loss too (Err, Lost).
func checkLostAtUnlock(t *testing.T, lk *blobstore.Lock, err error) {
	t.Helper()
	if !errors.Is(err, etagstore.ErrLockLost) || driver.SentinelOf(err) != etagstore.ErrLockLost {
		t.Fatalf("Unlock = %v, want ErrLockLost", err)
	}
	for _, other := range []error{etagstore.ErrNotFound, etagstore.ErrLocked, etagstore.ErrExists, etagstore.ErrConflict, etagstore.ErrUnavailable} {
		if errors.Is(err, other) {
			t.Errorf("Unlock = %v: matches %v beside ErrLockLost", err, other)
		}
	}
	checkOneLine(t, "Unlock of a lost lock", err)
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Errorf("Unlock = %v, want the service's answer one errors.As away", err)
	}
	if !errors.Is(lk.Err(), etagstore.ErrLockLost) {
		t.Errorf("Err after Unlock found the loss = %v, want ErrLockLost", lk.Err())
	}
	select {
	case <-lk.Lost():
	default:
		t.Error("Lost is not closed after Unlock found the loss")
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Errorf("second Unlock = %v, want nil", err)
	}
}

// A's lease is broken and another process's Locker takes the lock before
// A's renewal could notice; A's Unlock, whose release the service answers
// 409 LeaseIdMismatchWithLeaseOperation, reports the loss.
func TestUnlockReportsTakeover(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, slowRenewals)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	breaker, err := blobstore.New(c, &blobstore.Options{Prefix: "locks/"}).BlobLease("k", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := breaker.Break(ctx, 0); err != nil {
		t.Fatal(err)
	}
	other, err := blobstore.NewLocker(c, slowRenewals)
	if err != nil {
		t.Fatal(err)
	}
	b, err := other.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("TryLock after the break: %v", err)
	}
	if a.Err() != nil {
		t.Fatalf("A noticed the loss before Unlock (%v): the test does not reach Unlock's release", a.Err())
	}
	checkLostAtUnlock(t, a, a.Unlock(ctx))
	// B's lease was left alone: B still holds the lock.
	if err := b.Err(); err != nil {
		t.Fatalf("B lost the lock: %v", err)
	}
	if _, err := l.TryLock(ctx, "k"); !errors.Is(err, etagstore.ErrLocked) {
		t.Fatalf("TryLock while B holds the lock = %v, want ErrLocked", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatalf("B's Unlock: %v", err)
	}
}

// The lock blob is deleted while A holds the lock (with its lease id, as a
// cleanup job holding it might): A's Unlock, whose release the service
// answers 404 BlobNotFound, reports the loss, not ErrNotFound.
func TestUnlockReportsDeletedLockBlob(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, slowRenewals)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	id := a.LeaseID()
	if _, err := c.NewBlobClient("locks/k").Delete(ctx, &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{
		LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: &id},
	}}); err != nil {
		t.Fatal(err)
	}
	if a.Err() != nil {
		t.Fatalf("A noticed the loss before Unlock (%v): the test does not reach Unlock's release", a.Err())
	}
	checkLostAtUnlock(t, a, a.Unlock(ctx))
	// The lock can be taken again: a fresh lock blob.
	again, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("TryLock after the deletion: %v", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A renewal that finds the lock blob gone (404) marks the lock lost with
// an error matching ErrLockLost alone, not ErrNotFound as well.
func TestRenewalReportsDeletedLockBlob(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, &blobstore.LockOptions{RenewInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	id := a.LeaseID()
	if _, err := c.NewBlobClient("locks/k").Delete(ctx, &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{
		LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: &id},
	}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the renewals did not notice the lock blob was deleted")
	}
	err = a.Err()
	if driver.SentinelOf(err) != etagstore.ErrLockLost || errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Err = %v, want ErrLockLost and no other sentinel", err)
	}
	checkOneLine(t, "a renewal of a deleted lock blob", err)
	if err := a.Unlock(ctx); driver.SentinelOf(err) != etagstore.ErrLockLost || errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Unlock = %v, want ErrLockLost and no other sentinel", err)
	}
}
