package blobstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

// A deploy moves the Expiry earlier (Until less two hours): the blob
// written under the old function (stamped Until) has expired by the new
// one, so Get hides it at once. Sweep lists it by its stamp, which is
// still ahead, and leaves it (docs/expiry.md: a stamp moves when the
// document is written again); once the old stamp is due, Sweep reads it
// and deletes it.
func TestSweepBlobExpiryFunctionMovedEarlier(t *testing.T) {
	ctx := t.Context()
	b := blobstore.New(azuritetest.NewContainer(t), nil)
	clock := storetest.NewFakeClock(storetest.ExpAt.Add(-3 * time.Hour))
	old := etagstore.New[storetest.ExpCard](b, &etagstore.Options{Clock: clock, ExpirySkew: -1}, storetest.ExpUntil)
	if _, err := old.Create(ctx, "k", storetest.ExpCard{Title: "t", Until: storetest.ExpAt.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	earlier := etagstore.Expiry(func(c storetest.ExpCard) time.Time { return c.Until.Add(-2 * time.Hour) })
	now := etagstore.New[storetest.ExpCard](b, &etagstore.Options{Clock: clock, ExpirySkew: -1}, earlier)
	clock.Set(storetest.ExpAt) // past Until-2h, before Until
	if _, err := now.Get(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get by the new function = %v, want ErrNotFound (expired at Until-2h)", err)
	}
	if n, err := now.Sweep(ctx); n != 0 || err != nil {
		t.Errorf("Sweep before the blob's stamp is due = %d, %v; want 0, nil: the stamp lists it as not due", n, err)
	}
	clock.Set(storetest.ExpAt.Add(time.Hour)) // the old stamp is due
	if n, err := now.Sweep(ctx); n != 1 || err != nil {
		t.Errorf("Sweep once the stamp is due = %d, %v; want 1, nil", n, err)
	}
}

// Of 5 blobs the Store wrote, 1 due and 4 that never expire, Sweep
// reads the one due and none of the 4.
func TestSweepBlobNeverExpiringIsNotRead(t *testing.T) {
	ctx := t.Context()
	rc := &readCounter{Backend: blobstore.New(azuritetest.NewContainer(t), nil), reads: map[string]int{}}
	clock := storetest.NewFakeClock(storetest.ExpAt.Add(-time.Hour))
	s := etagstore.New[storetest.ExpCard](rc, &etagstore.Options{Clock: clock, ExpirySkew: -1}, storetest.ExpUntil)
	if _, err := s.Create(ctx, "due", storetest.ExpCard{Title: "t", Until: storetest.ExpAt.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"n0", "n1", "n2", "n3"} {
		if _, err := s.Create(ctx, k, storetest.ExpCard{Title: "t"}); err != nil { // Until zero: never expires
			t.Fatal(err)
		}
	}
	clear(rc.reads)
	clock.Set(storetest.ExpAt)
	if n, err := s.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v; want 1, nil", n, err)
	}
	if len(rc.reads) != 1 || rc.reads["due"] != 1 {
		t.Errorf("Sweep read %v; want only the due blob, once", rc.reads)
	}
}

// Transact over a blob Store refuses with errors.ErrUnsupported, naming
// the backend as it does for a blob Store without an Expiry.
func TestTransactBlobExpiryNamesBlobstore(t *testing.T) {
	ctx := t.Context()
	b := blobstore.New(azuritetest.NewContainer(t), nil)
	for _, s := range []*etagstore.Store[storetest.ExpCard]{
		etagstore.New[storetest.ExpCard](b, nil),
		etagstore.New[storetest.ExpCard](b, nil, storetest.ExpUntil),
	} {
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[storetest.ExpCard]) error {
			return tx.Put("k", storetest.ExpCard{Title: "t"})
		})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Transact over blobs = %v, want ErrUnsupported", err)
		}
		if !strings.Contains(err.Error(), "blobstore") {
			t.Errorf("Transact over blobs (Expiry %v): %q does not name blobstore", s.Expires(), err)
		}
	}
}
