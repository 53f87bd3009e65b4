package blobstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
)

// Lease ids are UUIDs: one that is not is refused with ErrInvalidInput
// before anything is sent, wherever a caller hands one in (BlobLease,
// ContainerLease, Change, WithLease); a UUID in either case is taken.
func TestLeaseIDsAreUUIDs(t *testing.T) {
	ctx := t.Context()
	c, requests := countedContainer(t)
	b := blobstore.New(c, nil)
	s := etagstore.New[Note](b, nil)
	if _, err := s.Create(ctx, "n", Note{Text: "v1"}); err != nil {
		t.Fatal(err)
	}
	held, err := b.BlobLease("n", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Acquire(ctx, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	bad := []string{
		"lease-1",
		"{" + blobstore.NewLeaseID() + "}",
		strings.ReplaceAll(blobstore.NewLeaseID(), "-", ""),
		blobstore.NewLeaseID() + " ",
		"0000000g-0000-4000-8000-000000000000",
		"00000000_0000-4000-8000-000000000000",
	}
	requests.take()
	for _, id := range bad {
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("%s with lease id %q = %v, want ErrInvalidInput", what, id, err)
			} else {
				checkOneLine(t, what, err)
			}
		}
		_, err := b.BlobLease("n", id)
		refused("BlobLease", err)
		_, err = b.ContainerLease(id)
		refused("ContainerLease", err)
		refused("Change", held.Change(ctx, id))
		leased := blobstore.WithLease(ctx, id)
		_, err = s.Get(leased, "n")
		refused("Get WithLease", err)
		_, err = s.Upsert(leased, "n", Note{Text: "bad id"})
		refused("Upsert WithLease", err)
		refused("Delete WithLease", s.Delete(leased, "n", etagstore.ETagAny))
		_, err = blobstore.GetIf(leased, s, "n", blobstore.ReadConditions{IfNoneMatch: `"0x1"`})
		refused("GetIf WithLease", err)
		if got := requests.take(); len(got) != 0 {
			t.Errorf("lease id %q: sent %v, want nothing", id, got)
		}
	}
	// The lease still has its id, and a UUID in upper case is taken.
	if err := held.Renew(ctx); err != nil {
		t.Fatalf("Renew after the refused Changes: %v", err)
	}
	upper := strings.ToUpper(blobstore.NewLeaseID())
	if err := held.Change(ctx, upper); err != nil {
		t.Fatalf("Change(%s): %v", upper, err)
	}
	if _, err := s.Upsert(blobstore.WithLease(ctx, upper), "n", Note{Text: "v2"}); err != nil {
		t.Fatalf("Upsert with the upper-case lease id: %v", err)
	}
	again, err := b.BlobLease("n", upper)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Renew(ctx); err != nil {
		t.Fatalf("Renew through a handle made with the upper-case id: %v", err)
	}
}
