package docstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/etagstore/etagstore"
	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

type counter struct {
	Name             string `docstore:"name"`
	N                int
	DocstoreRevision any
}

// lossy commits every write and then, for one write in every few, loses
// the answer (a transport error), as a dropped response does.
type lossy struct {
	edriver.Backend
	n    atomic.Int64
	lost atomic.Int64
}

var errLost = errors.New("connection reset by peer")

func (l *lossy) Write(ctx context.Context, key string, w edriver.Write) (edriver.ETag, error) {
	etag, err := l.Backend.Write(ctx, key, w)
	if err == nil && l.n.Add(1)%7 == 0 {
		l.lost.Add(1)
		return "", errLost
	}
	return etag, err
}

func (l *lossy) Delete(ctx context.Context, key string, etag edriver.ETag) error {
	if err := l.Backend.Delete(ctx, key, etag); err != nil {
		return err
	}
	return errLost
}

// Concurrent docstore Updates with an increment and no revision go through
// Store.Update: retried on conflicts and applied exactly once although
// answers are lost; each returns a revision.
func TestUpdateExactlyOnce(t *testing.T) {
	const writers, each = 16, 20
	b := &lossy{Backend: memstore.New(nil)}
	coll, err := OpenCollection(b, "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	ctx := t.Context()
	if err := coll.Create(ctx, &counter{Name: "c"}); err != nil {
		t.Fatal(err)
	}
	var ok, unknown atomic.Int64
	var emptyRev atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				d := &counter{Name: "c"}
				err := coll.Update(ctx, d, docstore.Mods{"N": docstore.Increment(1)})
				switch {
				case err == nil:
					ok.Add(1)
					if d.DocstoreRevision == nil {
						emptyRev.Add(1)
					}
				case gcerrors.Code(err) == gcerrors.Unknown:
					unknown.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got := &counter{Name: "c"}
	if err := coll.Get(ctx, got); err != nil {
		t.Fatal(err)
	}
	if int64(got.N) < ok.Load() || int64(got.N) > ok.Load()+unknown.Load() {
		t.Errorf("counter %d, want between %d succeeded and %d (with the unknown)", got.N, ok.Load(), ok.Load()+unknown.Load())
	}
	t.Logf("%d succeeded, %d unknown, counter %d, %d answers lost, %d revisions missing", ok.Load(), unknown.Load(), got.N, b.lost.Load(), emptyRev.Load())
	if emptyRev.Load() > 0 {
		t.Errorf("%d Updates returned no revision", emptyRev.Load())
	}
}

// A stale revision is FailedPrecondition for every write kind, Update
// included; a missing document NotFound.
func TestRevisionConflicts(t *testing.T) {
	ctx := t.Context()
	coll, err := OpenCollection(memstore.New(nil), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	old := &counter{Name: "a"}
	if err := coll.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := coll.Update(ctx, &counter{Name: "a"}, docstore.Mods{"N": 5}); err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func() error{
		"Update": func() error {
			return coll.Update(ctx, &counter{Name: "a", DocstoreRevision: old.DocstoreRevision}, docstore.Mods{"N": 1})
		},
		"Replace": func() error { return coll.Replace(ctx, &counter{Name: "a", DocstoreRevision: old.DocstoreRevision}) },
		"Put":     func() error { return coll.Put(ctx, &counter{Name: "a", DocstoreRevision: old.DocstoreRevision}) },
		"Delete":  func() error { return coll.Delete(ctx, &counter{Name: "a", DocstoreRevision: old.DocstoreRevision}) },
	} {
		if c := gcerrors.Code(write()); c != gcerrors.FailedPrecondition {
			t.Errorf("%s with a stale revision: %v, want FailedPrecondition", name, c)
		}
	}
	if c := gcerrors.Code(coll.Update(ctx, &counter{Name: "b"}, docstore.Mods{"N": 1})); c != gcerrors.NotFound {
		t.Errorf("Update of a missing document: %v, want NotFound", c)
	}
	rev, _ := old.DocstoreRevision.(string)
	if rev == "" || rev == "*" {
		t.Errorf("revision %q is not a whole ETag", rev)
	}
}

// Every sentinel maps to its gcerrors code.
func TestErrorCodes(t *testing.T) {
	c := &collection{}
	for _, m := range codes {
		err := fmt.Errorf("op: %w", m.sentinel)
		if got := c.ErrorCode(err); got != m.code {
			t.Errorf("%v: %v, want %v", m.sentinel, got, m.code)
		}
	}
	if got := c.ErrorCode(&etagstore.OutcomeUnknownError{Op: "Delete", Key: "k", Cause: errLost}); got != gcerrors.Unknown {
		t.Errorf("OutcomeUnknownError: %v, want Unknown", got)
	}
}

// ErrorAs reaches the *etagstore.OutcomeUnknownError of a lost answer.
func TestErrorAsOutcomeUnknown(t *testing.T) {
	ctx := t.Context()
	coll, err := OpenCollection(&lossy{Backend: memstore.New(nil)}, "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	if err := coll.Put(ctx, &counter{Name: "x"}); err != nil && gcerrors.Code(err) != gcerrors.OK {
		t.Fatal(err)
	}
	err = coll.Delete(ctx, &counter{Name: "x"}) // applied; its answer lost; the read finds it gone
	if gcerrors.Code(err) != gcerrors.Unknown {
		t.Fatalf("Delete with its answer lost: %v, want Unknown", err)
	}
	var ou *etagstore.OutcomeUnknownError
	if !coll.ErrorAs(err, &ou) || ou.Key != "x" {
		t.Errorf("ErrorAs(*etagstore.OutcomeUnknownError) = %v, %+v", ou != nil, ou)
	}
}

// ErrorAs reaches the Azure SDK's *azcore.ResponseError.
func TestErrorAsResponseError(t *testing.T) {
	ctx := t.Context()
	coll, err := OpenCollection(tablestore.New(azuritetest.MissingTable(t), &tablestore.Options{Partition: "p"}), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	err = coll.Get(ctx, &counter{Name: "x"})
	if gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("Get on a missing table: %v, want NotFound", err)
	}
	var re *azcore.ResponseError
	if !coll.ErrorAs(err, &re) || re.StatusCode != 404 {
		t.Errorf("ErrorAs(*azcore.ResponseError) = %v, %v", re != nil, err)
	}
}
