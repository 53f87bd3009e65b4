package blobstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}

// Blobs keep no index entries: a blob write cannot commit with another
// (no Abilities.Commit), so an entry could not land with its document.
// The conformance suite's Entries group skips for that reason.
func TestNoEntries(t *testing.T) {
	b := blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	if a := b.Abilities(); a.Entries != nil || a.Commit != nil {
		t.Errorf("blobstore declares Entries %v, Commit %v; want neither", a.Entries != nil, a.Commit != nil)
	}
}

// A Store of an older type keeps the members a newer type wrote.
func TestExtraMembersKept(t *testing.T) {
	storetest.RunExtra(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}

func TestExactlyOnceUnderFaults(t *testing.T) {
	storetest.RunFaults(t, func(t *testing.T, f storetest.Faults) (driver.Backend, func() map[string]int) {
		proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Blob"), f)
		return blobstore.New(azuritetest.NewContainerVia(t, proxy.URL()), &blobstore.Options{Prefix: "docs/"}), proxy.Counts
	})
}

func TestMissingContainer(t *testing.T) {
	storetest.RunMissingResource(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.MissingContainer(t), &blobstore.Options{Prefix: "docs/"})
	}, "container")
	// The backend's own operations: conditional reads and the Locker.
	c := azuritetest.MissingContainer(t)
	s := etagstore.New[Note](blobstore.New(c, &blobstore.Options{Prefix: "docs/"}), nil)
	ctx := t.Context()
	errs := map[string]error{}
	_, errs["GetIf"] = blobstore.GetIf(ctx, s, "k", blobstore.ReadConditions{})
	l, err := blobstore.NewLocker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, errs["TryLock"] = l.TryLock(ctx, "k")
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, errs["Lock"] = l.Lock(lctx, "k")
	for op, err := range errs {
		if !errors.Is(err, etagstore.ErrStorageNotFound) || errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("%s on a missing container = %v, want ErrStorageNotFound (and not ErrNotFound)", op, err)
		}
	}
}
