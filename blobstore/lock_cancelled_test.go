package blobstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
)

// Lock and TryLock with a context done before they asked the service fail
// alike, with the context's error and no sentinel: nothing says the lock is
// held (not ErrLocked), and nothing is sent.
func TestLockWithDoneContextBeforeTrying(t *testing.T) {
	c, requests := countedContainer(t)
	l, err := blobstore.NewLocker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	requests.take()
	for name, try := range map[string]func() (*blobstore.Lock, error){
		"Lock":    func() (*blobstore.Lock, error) { return l.Lock(cancelled, "free") },
		"TryLock": func() (*blobstore.Lock, error) { return l.TryLock(cancelled, "free") },
	} {
		lk, err := try()
		if lk != nil || !errors.Is(err, context.Canceled) || errors.Is(err, etagstore.ErrLocked) || driver.SentinelOf(err) != nil {
			t.Errorf("%s(cancelled, free key) = %v, %v; want context.Canceled and no sentinel", name, lk, err)
		}
		if err != nil {
			checkOneLine(t, name+" with a cancelled context", err)
		}
		if got := requests.take(); len(got) != 0 {
			t.Errorf("%s(cancelled) sent %v, want nothing", name, got)
		}
	}

	// Held by another process, but not asked: the same.
	other, err := blobstore.NewLocker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Lock(t.Context(), "held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(t.Context())
	if _, err := l.Lock(cancelled, "held"); !errors.Is(err, context.Canceled) || errors.Is(err, etagstore.ErrLocked) {
		t.Errorf("Lock(cancelled, key of another process) = %v, want context.Canceled and not ErrLocked", err)
	}

	// The free key is still free: nothing was left behind.
	lk, err := l.TryLock(t.Context(), "free")
	if err != nil {
		t.Fatalf("TryLock after the cancelled tries: %v", err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
