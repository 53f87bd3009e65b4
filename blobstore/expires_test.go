package blobstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

// readCounter is a blob backend that counts its reads by key.
type readCounter struct {
	driver.Backend
	mu    sync.Mutex
	reads map[string]int
}

func (r *readCounter) Read(ctx context.Context, key string) (driver.Item, error) {
	r.mu.Lock()
	r.reads[key]++
	r.mu.Unlock()
	return r.Backend.Read(ctx, key)
}

// expiresMeta is the etagstoreexpires metadata of the blob name, "" when
// it has none.
func expiresMeta(t *testing.T, c *container.Client, name string) string {
	t.Helper()
	props, err := c.NewBlobClient(name).GetProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range props.Metadata {
		if strings.EqualFold(k, "etagstoreexpires") && v != nil {
			return *v
		}
	}
	return ""
}

// TestExpiresInMetadata: a Store with an Expiry writes when each document
// expires in its blob's metadata (milliseconds, rounded up); a write that
// moves the expiry moves it, and a Store without an Expiry writes none.
// Read returns it as Item.Expires.
func TestExpiresInMetadata(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	b := blobstore.New(c, nil)
	s := etagstore.New[storetest.ExpCard](b, &etagstore.Options{Clock: storetest.NewFakeClock(storetest.ExpAt.Add(-time.Hour))}, storetest.ExpUntil)
	at := storetest.ExpAt.Add(300 * time.Microsecond)
	if _, err := s.Create(ctx, "k", storetest.ExpCard{Title: "t", Until: at}); err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(storetest.ExpAt.UnixMilli()+1, 10) // rounded up
	if got := expiresMeta(t, c, "k"); got != want {
		t.Errorf("metadata etagstoreexpires = %q, want %q (%v, rounded up to the millisecond)", got, want, at)
	}
	it, err := b.Read(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if w := time.UnixMilli(storetest.ExpAt.UnixMilli() + 1); !it.Expires.Equal(w) {
		t.Errorf("Read's Item.Expires = %v, want %v", it.Expires, w)
	}
	later := storetest.ExpAt.Add(time.Hour)
	if _, err := s.Update(ctx, "k", func(c *storetest.ExpCard) error { c.Until = later; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := expiresMeta(t, c, "k"), strconv.FormatInt(later.UnixMilli(), 10); got != want {
		t.Errorf("after an Update moving the expiry: etagstoreexpires = %q, want %q", got, want)
	}
	plain := etagstore.New[storetest.ExpCard](b, nil)
	if _, err := plain.Create(ctx, "p", storetest.ExpCard{Title: "t", Until: at}); err != nil {
		t.Fatal(err)
	}
	if got := expiresMeta(t, c, "p"); got != "" {
		t.Errorf("a Store without an Expiry wrote etagstoreexpires = %q", got)
	}
}

// TestSweepReadsOnlyDueBlobs: over 10 blobs, 3 expired by the cutoff, 1
// written by a Store without the Expiry (no stamp: read to judge, not
// due), 6 live, Sweep lists them once and reads only the 3 due and the
// unstamped one; it deletes the 3.
func TestSweepReadsOnlyDueBlobs(t *testing.T) {
	ctx := t.Context()
	rc := &readCounter{Backend: blobstore.New(azuritetest.NewContainer(t), nil), reads: map[string]int{}}
	clock := storetest.NewFakeClock(storetest.ExpAt.Add(-time.Hour))
	s := etagstore.New[storetest.ExpCard](rc, &etagstore.Options{Clock: clock, ExpirySkew: -1}, storetest.ExpUntil)
	for i := range 9 {
		until := storetest.ExpAt.Add(time.Hour)
		if i < 3 {
			until = storetest.ExpAt.Add(-time.Minute)
		}
		if _, err := s.Create(ctx, "k"+strconv.Itoa(i), storetest.ExpCard{Title: "t", Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := etagstore.New[storetest.ExpCard](rc, nil).Create(ctx, "u", storetest.ExpCard{Title: "t", Until: storetest.ExpAt.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	clear(rc.reads)
	clock.Set(storetest.ExpAt)
	n, err := s.Sweep(ctx)
	if n != 3 || err != nil {
		t.Fatalf("Sweep = %d, %v; want 3, nil", n, err)
	}
	want := map[string]int{"k0": 1, "k1": 1, "k2": 1, "u": 1}
	if len(rc.reads) != len(want) {
		t.Errorf("Sweep read %v; want %v: the 3 due and the one without a stamp, once each", rc.reads, want)
	}
	for k, w := range want {
		if rc.reads[k] != w {
			t.Errorf("Sweep read %q %d times, want %d (all reads: %v)", k, rc.reads[k], w, rc.reads)
		}
	}
	for i := range 9 {
		_, err := rc.Backend.Read(ctx, "k"+strconv.Itoa(i))
		if gone := err != nil; gone != (i < 3) {
			t.Errorf("k%d after the sweep: read error %v", i, err)
		}
	}
}

// A Store's Backend is the one New was given, not the wrapper that
// stamps its writes; a second Store over it with another Expiry stamps
// its writes by its own function alone.
func TestExpiresStoreOverAnotherStoresBackend(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	b := blobstore.New(c, nil)
	first := etagstore.New[storetest.ExpCard](b, nil, storetest.ExpUntil)
	if got := first.Backend(); got != driver.Backend(b) {
		t.Fatalf("Backend() = %T %p, want the *blobstore.Backend given to New (%p)", got, got, b)
	}
	later := etagstore.Expiry(func(c storetest.ExpCard) time.Time { return c.Until.Add(time.Hour) })
	second := etagstore.New[storetest.ExpCard](first.Backend(), nil, later)
	if _, err := second.Create(ctx, "k", storetest.ExpCard{Title: "t", Until: storetest.ExpAt}); err != nil {
		t.Fatal(err)
	}
	if got, want := expiresMeta(t, c, "k"), strconv.FormatInt(storetest.ExpAt.Add(time.Hour).UnixMilli(), 10); got != want {
		t.Errorf("etagstoreexpires = %q, want %q: the second Store's function", got, want)
	}
}
