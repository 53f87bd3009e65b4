package blobstore_test

// Blob tombstones: what the read-first of an ETagAny write or delete, and
// of a create over a tombstone, does under contention and failures, and
// how GetIf and leases see a tombstone.

import (
	"context"
	"errors"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

type probeDoc struct{ Title string }

// afterHead runs hook, on the caller's goroutine, after each answered
// HEAD (Get Blob Properties) whose blob name ends with suffix.
type afterHead struct {
	suffix string
	hook   func()
}

func (p *afterHead) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err == nil && req.Raw().Method == http.MethodHead && strings.HasSuffix(req.Raw().URL.Path, p.suffix) && p.hook != nil {
		p.hook()
	}
	return resp, err
}

// hooked returns a client of c's container whose requests pass p.
func hooked(t *testing.T, c *container.Client, p policy.Policy) *container.Client {
	t.Helper()
	opts := azuritetest.Options
	opts.PerCallPolicies = []policy.Policy{p}
	svc, err := azblob.NewClientFromConnectionString(azuritetest.ConnectionString(t), &azblob.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return svc.ServiceClient().NewContainerClient(path.Base(c.URL()))
}

// TestBlobETagAnyRacesUntilItsTime: an ETagAny Replace or Delete on blobs
// reads the blob's properties and sends If-Match of the version found,
// again on a race. Another writer that changes the document right after
// each of the first reads does not make it fail, nor report the document
// missing: contention is bounded by time, not by a count.
func TestBlobETagAnyRacesUntilItsTime(t *testing.T) {
	for _, op := range []string{"Replace", "Delete"} {
		t.Run(op, func(t *testing.T) {
			ctx := t.Context()
			c := azuritetest.NewContainer(t)
			other := blobstore.NewStore[probeDoc](c, nil, nil)
			if _, err := other.Create(ctx, "k", probeDoc{"0"}); err != nil {
				t.Fatal(err)
			}
			var races atomic.Int32
			hook := &afterHead{suffix: "/k"}
			hook.hook = func() {
				if races.Add(1) > 8 {
					return
				}
				if _, err := other.Upsert(context.WithoutCancel(ctx), "k", probeDoc{"theirs"}); err != nil {
					t.Errorf("the other writer: %v", err)
				}
			}
			s := blobstore.NewStore[probeDoc](hooked(t, c, hook), nil, nil)
			var err error
			if op == "Replace" {
				_, err = s.Replace(ctx, etagstore.Doc[probeDoc]{Key: "k", ETag: etagstore.ETagAny, Value: probeDoc{"mine"}})
			} else {
				err = s.Delete(ctx, "k", etagstore.ETagAny)
			}
			t.Logf("%s(ETagAny) after %d lost races: %v", op, races.Load(), err)
			if err != nil {
				t.Errorf("%s(ETagAny) of a document that exists throughout, losing 8 races to another writer, = %v; want nil (contention is bounded by time)", op, err)
			}
			if errors.Is(err, etagstore.ErrNotFound) {
				if _, gerr := other.Get(ctx, "k"); gerr == nil {
					t.Errorf("%s(ETagAny) matched ErrNotFound while the document exists", op)
				}
			}
		})
	}
}

// TestBlobCreateOverTombstoneRaces: a Create over a tombstone reads the
// tombstone and replaces it If-Match its ETag, again on a race. Another
// holder of the same token that creates and deletes (fenced) the key
// right after each of the first reads does not make it fail with an error
// no Create documents.
func TestBlobCreateOverTombstoneRaces(t *testing.T) {
	ctx := t.Context()
	at := etagstore.WithFence(ctx, 5)
	c := azuritetest.NewContainer(t)
	other := blobstore.NewStore[probeDoc](c, nil, nil)
	if _, err := other.Create(at, "k", probeDoc{"0"}); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(at, "k", etagstore.ETagAny); err != nil { // a tombstone keeping 5
		t.Fatal(err)
	}
	var races atomic.Int32
	hook := &afterHead{suffix: "/k"}
	hook.hook = func() {
		if races.Add(1) > 8 {
			return
		}
		octx := etagstore.WithFence(context.WithoutCancel(ctx), 5)
		if _, err := other.Create(octx, "k", probeDoc{"theirs"}); err != nil {
			t.Errorf("the other holder's Create: %v", err)
			return
		}
		if err := other.Delete(octx, "k", etagstore.ETagAny); err != nil {
			t.Errorf("the other holder's Delete: %v", err)
		}
	}
	s := blobstore.NewStore[probeDoc](hooked(t, c, hook), nil, nil)
	_, err := s.Create(at, "k", probeDoc{"mine"})
	t.Logf("Create over a tombstone after %d lost races: %v", races.Load(), err)
	if err != nil {
		t.Errorf("fenced Create (token 5) over a tombstone keeping 5, losing 8 races to a holder of the same token = %v; want nil", err)
		if errors.Is(err, etagstore.ErrConflict) {
			t.Errorf("Create documents ErrExists and ErrFenced, not ErrConflict")
		}
	}
}

// TestGetIfTombstone: to GetIf a tombstone answers as a key that never
// existed, whatever the conditions, though the service judges date
// conditions on the tombstone itself.
func TestGetIfTombstone(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	s := blobstore.NewStore[probeDoc](c, nil, nil)
	d, err := s.Create(etagstore.WithFence(ctx, 2), "k", probeDoc{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(etagstore.WithFence(ctx, 3), "k", etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	// Each answer is compared with the same call on a key that never
	// existed: a tombstone must be indistinguishable from it.
	for name, cond := range map[string]blobstore.ReadConditions{
		"IfModifiedSince future":   {IfModifiedSince: time.Now().Add(time.Hour)},
		"IfUnmodifiedSince past":   {IfUnmodifiedSince: time.Now().Add(-time.Hour)},
		"IfMatch the deleted ETag": {IfMatch: d.ETag},
		"IfNoneMatch * + IfMatch":  {IfNoneMatch: etagstore.ETagAny, IfMatch: d.ETag},
	} {
		_, never := blobstore.GetIf(ctx, s, "never", cond)
		_, err := blobstore.GetIf(ctx, s, "k", cond)
		for _, sentinel := range []error{etagstore.ErrNotFound, etagstore.ErrConflict, blobstore.ErrNotModified} {
			if errors.Is(err, sentinel) != errors.Is(never, sentinel) {
				t.Errorf("GetIf(%s) of a key a fenced Delete removed = %v; of a key that never existed = %v", name, err, never)
				break
			}
		}
	}
}

// TestBlobLeasedTombstone: a fenced Delete under the document's blob lease
// (WithLease) replaces the blob by a tombstone and releases the lease, as
// a delete ends it: another writer's Create of the key, which reads as
// missing, is not refused as locked.
func TestBlobLeasedTombstone(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	s := blobstore.NewStore[probeDoc](c, nil, nil)
	for _, fenced := range []bool{false, true} {
		key := "unfenced"
		if fenced {
			key = "fenced"
		}
		if _, err := s.Create(ctx, key, probeDoc{"a"}); err != nil {
			t.Fatal(err)
		}
		var b *blobstore.Backend
		if !s.Backend().As(&b) {
			t.Fatal("no blobstore backend")
		}
		l, err := b.BlobLease(key, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Acquire(ctx, blobstore.Infinite); err != nil {
			t.Fatal(err)
		}
		dctx := blobstore.WithLease(ctx, l.ID())
		if fenced {
			dctx = etagstore.WithFence(dctx, 4)
		}
		if err := s.Delete(dctx, key, etagstore.ETagAny); err != nil {
			t.Fatalf("Delete(%s) under the lease: %v", key, err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Get(%s) after the Delete = %v, want ErrNotFound", key, err)
		}
		if _, err := s.Create(ctx, key, probeDoc{"another's"}); err != nil {
			t.Errorf("another writer's Create of %q, which reads as missing, = %v; want nil", key, err)
		}
	}
}

// failHead fails the first n HEADs (Get Blob Properties) of blob
// names ending with suffix with a transport error, sending nothing.
type failHead struct {
	suffix string
	n      atomic.Int32
}

func (p *failHead) Do(req *policy.Request) (*http.Response, error) {
	if req.Raw().Method == http.MethodHead && strings.HasSuffix(req.Raw().URL.Path, p.suffix) && p.n.Add(-1) >= 0 {
		return nil, errors.New("injected: connection reset before the request was sent")
	}
	return req.Next()
}

// TestBlobFailedReadFirstIsNotUnknown: an ETagAny Replace or Delete and a
// Create over a tombstone read the blob's properties before they write.
// When that read fails (a transport error; nothing reaches the service),
// the outcome is not reported unknown: no write was sent.
func TestBlobFailedReadFirstIsNotUnknown(t *testing.T) {
	for _, op := range []string{"Replace", "Delete", "Create over a tombstone"} {
		t.Run(op, func(t *testing.T) {
			ctx := t.Context()
			c := azuritetest.NewContainer(t)
			plain := blobstore.NewStore[probeDoc](c, nil, nil)
			if _, err := plain.Create(etagstore.WithFence(ctx, 2), "k", probeDoc{"0"}); err != nil {
				t.Fatal(err)
			}
			if op == "Create over a tombstone" {
				if err := plain.Delete(etagstore.WithFence(ctx, 2), "k", etagstore.ETagAny); err != nil {
					t.Fatal(err)
				}
			}
			fail := &failHead{suffix: "/k"}
			fail.n.Store(1)
			s := blobstore.NewStore[probeDoc](hooked(t, c, fail), nil, nil)
			var err error
			switch op {
			case "Replace":
				_, err = s.Replace(ctx, etagstore.Doc[probeDoc]{Key: "k", ETag: etagstore.ETagAny, Value: probeDoc{"mine"}})
			case "Delete":
				err = s.Delete(ctx, "k", etagstore.ETagAny)
			default:
				_, err = s.Create(etagstore.WithFence(ctx, 2), "k", probeDoc{"mine"})
			}
			got, gerr := plain.Get(ctx, "k")
			t.Logf("%s with its read-first failing: %v (stored: %+v, %v)", op, err, got.Value, gerr)
			if errors.Is(err, etagstore.ErrOutcomeUnknown) {
				t.Errorf("%s whose read-first failed before any write was sent = %v; want a definite answer (nothing was written)", op, err)
			}
		})
	}
}
