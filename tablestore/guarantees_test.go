package tablestore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/tablestore"
)

// Issue 12: batches and merges keep the guarantees of Store writes.

// lossy is an SDK transport that loses the answers of the next writes it is
// told to: after the server committed them (dropAfter), or before sending
// them at all (failBefore). Reads always pass.
type lossy struct {
	mu                    sync.Mutex
	dropAfter, failBefore int
	inner                 http.Client
}

var errLost = errors.New("test: connection reset, answer lost")

func (l *lossy) Do(req *http.Request) (*http.Response, error) {
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	l.mu.Lock()
	before := write && l.failBefore > 0
	after := write && !before && l.dropAfter > 0
	if before {
		l.failBefore--
	}
	if after {
		l.dropAfter--
	}
	l.mu.Unlock()
	if before {
		return nil, errLost
	}
	resp, err := l.inner.Do(req)
	if err != nil || !after {
		return resp, err
	}
	resp.Body.Close()
	return nil, errLost
}

func (l *lossy) lose(dropAfter, failBefore int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropAfter, l.failBefore = dropAfter, failBefore
}

// newLossyStores returns two Stores on one fresh table: clean, and lossy,
// whose client loses answers when l says so.
func newLossyStores(t *testing.T) (clean, lossyStore *etagstore.Store[Task], l *lossy) {
	t.Helper()
	cs := azuritetest.ConnectionString(t)
	svc, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := azuritetest.Name("t")
	if _, err := svc.CreateTable(t.Context(), name, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = svc.DeleteTable(ctx, name, nil)
	})
	l = &lossy{}
	lsvc, err := aztables.NewServiceClientFromConnectionString(cs, &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: l}})
	if err != nil {
		t.Fatal(err)
	}
	return tablestore.NewStore[Task](svc.NewClient(name), nil, nil), tablestore.NewStore[Task](lsvc.NewClient(name), nil, nil), l
}

func storedMeta(t *testing.T, s *etagstore.Store[Task], key string) meta.Meta {
	t.Helper()
	it, err := s.Backend().Read(t.Context(), key)
	if err != nil {
		t.Fatalf("Read %q: %v", key, err)
	}
	return meta.Parse(it.Meta)
}

// Batch Create, Replace and Upsert start a new history with a write id, as
// the Store's do; a batch Merge keeps the stored bookkeeping.
func TestBatchKeepsBookkeeping(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	r, _ := s.Create(ctx, "p/r", Task{Title: "r"})
	m, _ := s.Create(ctx, "p/m", Task{Title: "m", Owner: "ann"})
	m, err := s.Update(ctx, m.Key, func(x *Task) error { x.N++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	mBefore := storedMeta(t, s, "p/m")
	_, err = tablestore.NewBatch(s).
		Create("p/c", Task{Title: "c"}).
		Replace(etagstore.Doc[Task]{Key: r.Key, Value: Task{Title: "r2"}, ETag: r.ETag}).
		Upsert("p/u", Task{Title: "u"}).
		Merge(etagstore.Doc[Task]{Key: m.Key, Value: Task{Title: "m2"}, ETag: m.ETag}, "Title").
		Submit(ctx)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	for _, k := range []string{"p/c", "p/r", "p/u"} {
		if got := storedMeta(t, s, k); got.Lineage == "" || got.Seq != 1 || got.Count() != 1 || got.LastID() == "" {
			t.Errorf("%s after a batch write: bookkeeping %q, want a new history with one write id", k, got)
		}
	}
	if got := storedMeta(t, s, "p/m"); got.String() != mBefore.String() {
		t.Errorf("p/m after a batch merge: bookkeeping %q, want it kept: %q", got, mBefore)
	}
	if got, _ := s.Get(ctx, "p/m"); got.Value != (Task{Title: "m2", Owner: "ann", N: 1}) {
		t.Errorf("p/m after a batch merge = %+v", got.Value)
	}
}

// racing is a Backend whose first write lets another writer commit first
// and then reports the write's refusal as an answer that may be to a retry
// of itself (driver.ErrAmbiguous), as a transport's retry would.
type racing struct {
	*tablestore.Backend
	once  sync.Once
	other func()
}

func (r *racing) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	raced := false
	r.once.Do(func() { r.other(); raced = true })
	etag, err := r.Backend.Write(ctx, key, w)
	if raced && err != nil {
		return "", fmt.Errorf("%w: %w", driver.ErrAmbiguous, err)
	}
	return etag, err
}

// After a batch Replace, the Store can still tell that an Update whose
// write was refused never landed (the history it continued went on without
// it), so it retries instead of reporting an unknown outcome.
func TestUpdateAfterBatchReplaceIsResolved(t *testing.T) {
	ctx := t.Context()
	s, client := newTaskStore(t, nil)
	d, err := s.Create(ctx, "p/k", Task{Title: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tablestore.NewBatch(s).Replace(etagstore.Doc[Task]{Key: d.Key, Value: Task{Title: "v2"}, ETag: d.ETag}).Submit(ctx); err != nil {
		t.Fatal(err)
	}
	rb := &racing{Backend: tablestore.New(client, nil), other: func() {
		if _, err := s.Update(ctx, "p/k", func(x *Task) error { x.N += 10; return nil }); err != nil {
			t.Errorf("the other writer's Update: %v", err)
		}
	}}
	got, err := etagstore.New[Task](rb, nil).Update(ctx, "p/k", func(x *Task) error { x.N++; return nil })
	if err != nil {
		t.Fatalf("Update = %v, want it retried and applied", err)
	}
	if got.Value.N != 11 {
		t.Errorf("Update returned N = %d, want 11", got.Value.N)
	}
	if stored, _ := s.Get(ctx, "p/k"); stored.Value != (Task{Title: "v2", N: 11}) {
		t.Errorf("stored %+v, want both updates once", stored.Value)
	}
}

// Fencing tokens: unconditional writes refuse a fenced context; conditional
// ones check the token against the stored version and record it.
func TestMergeAndBatchHonourFences(t *testing.T) {
	ctx := t.Context()
	s, _ := newTaskStore(t, nil)
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	d, err := s.Create(at(5), "p/f", Task{Title: "v1", Owner: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tablestore.UpsertMerge(at(5), s, "p/f", Task{Title: "x"}, "Title"); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("fenced UpsertMerge = %v, want ErrInvalidInput", err)
	}
	for name, b := range map[string]*tablestore.Batch[Task]{
		"upsert":       tablestore.NewBatch(s).Upsert("p/f", Task{Title: "x"}),
		"upsert-merge": tablestore.NewBatch(s).Create("p/new", Task{}).UpsertMerge("p/f", Task{Title: "x"}, "Title"),
	} {
		if _, err := b.Submit(at(5)); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("fenced batch %s = %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := tablestore.Merge(at(3), s, etagstore.Doc[Task]{Key: d.Key, Value: Task{Title: "stale"}, ETag: d.ETag}, "Title"); !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("Merge with a lower token = %v, want ErrFenced", err)
	}
	for name, b := range map[string]*tablestore.Batch[Task]{
		"replace": tablestore.NewBatch(s).Replace(etagstore.Doc[Task]{Key: d.Key, Value: Task{Title: "stale"}, ETag: d.ETag}),
		"merge":   tablestore.NewBatch(s).Create("p/new", Task{}).Merge(etagstore.Doc[Task]{Key: d.Key, Value: Task{Title: "stale"}, ETag: etagstore.ETagAny}, "Title"),
		"delete":  tablestore.NewBatch(s).Delete(d.Key, d.ETag),
	} {
		if _, err := b.Submit(at(3)); !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("batch %s with a lower token = %v, want ErrFenced", name, err)
		}
	}
	if got, err := s.Get(ctx, d.Key); err != nil || got != d {
		t.Fatalf("after refused writes: %+v, %v; want %+v", got, err, d)
	}
	if _, err := s.Get(ctx, "p/new"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("a refused batch created p/new: %v", err)
	}

	// A higher token is checked, written and recorded.
	if _, err := tablestore.Merge(at(7), s, etagstore.Doc[Task]{Key: d.Key, Value: Task{Title: "v2"}, ETag: d.ETag}, "Title"); err != nil {
		t.Fatalf("Merge with a higher token: %v", err)
	}
	if _, err := s.Update(at(6), d.Key, func(x *Task) error { x.N++; return nil }); !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("Update with token 6 after a Merge with 7 = %v, want ErrFenced", err)
	}
	cur, _ := s.Get(ctx, d.Key)
	if _, err := tablestore.NewBatch(s).Replace(etagstore.Doc[Task]{Key: d.Key, Value: Task{Title: "v3"}, ETag: d.ETag}).Submit(at(8)); !errors.Is(err, etagstore.ErrConflict) {
		t.Errorf("fenced batch Replace with a stale ETag = %v, want ErrConflict", err)
	}
	_, err = tablestore.NewBatch(s).
		Replace(etagstore.Doc[Task]{Key: d.Key, Value: Task{Title: "v3"}, ETag: cur.ETag}).
		Create("p/c", Task{Title: "c"}).
		Submit(at(8))
	if err != nil {
		t.Fatalf("fenced batch with a higher token: %v", err)
	}
	if _, err := s.Update(at(7), d.Key, func(x *Task) error { x.N++; return nil }); !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("Update with token 7 after a batch with 8 = %v, want ErrFenced", err)
	}
	if m := storedMeta(t, s, "p/c"); m.Fence != 8 {
		t.Errorf("fenced batch Create recorded token %d, want 8", m.Fence)
	}
	if got, _ := s.Get(ctx, d.Key); got.Value != (Task{Title: "v3"}) {
		t.Errorf("after the fenced batch: %+v", got.Value)
	}
}

// A Merge whose answer was lost is resolved by reading: found committed, or
// not landed and sent again.
func TestMergeLostAnswerResolved(t *testing.T) {
	ctx := t.Context()
	clean, s, l := newLossyStores(t)
	d, err := clean.Create(ctx, "p/k", Task{Title: "v1", Owner: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                  string
		dropAfter, failBefore int
		etag                  etagstore.ETag // "": the current one
	}{
		{"committed", 1, 0, ""},
		{"committed, ETagAny", 1, 0, etagstore.ETagAny},
		{"not landed", 0, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, _ := clean.Get(ctx, d.Key)
			held := tc.etag
			if held == "" {
				held = cur.ETag
			}
			l.lose(tc.dropAfter, tc.failBefore)
			etag, err := tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: d.Key, Value: Task{N: cur.Value.N + 1}, ETag: held}, "N")
			if err != nil {
				t.Fatalf("Merge = %v, want its lost answer resolved", err)
			}
			got, _ := clean.Get(ctx, d.Key)
			if got.Value != (Task{Title: "v1", Owner: "ann", N: cur.Value.N + 1}) || got.ETag != etag {
				t.Errorf("stored %+v (ETag %s), want N %d with the ETag Merge returned (%s)", got.Value, got.ETag, cur.Value.N+1, etag)
			}
		})
	}
}

// A batch whose answer was lost is resolved by reading when it carries a
// write id or a condition; otherwise the outcome is unknown, and only that.
func TestBatchLostAnswerResolved(t *testing.T) {
	ctx := t.Context()
	clean, s, l := newLossyStores(t)
	a, _ := clean.Create(ctx, "p/a", Task{Title: "a"})
	b, _ := clean.Create(ctx, "p/b", Task{Title: "b", Owner: "bob"})

	l.lose(1, 0)
	_, err := tablestore.NewBatch(s).
		Replace(etagstore.Doc[Task]{Key: a.Key, Value: Task{Title: "a2"}, ETag: a.ETag}).
		Merge(etagstore.Doc[Task]{Key: b.Key, Value: Task{Title: "b2"}, ETag: b.ETag}, "Title").
		Submit(ctx)
	if err != nil {
		t.Fatalf("committed batch whose answer was lost: %v", err)
	}
	ga, _ := clean.Get(ctx, a.Key)
	gb, _ := clean.Get(ctx, b.Key)
	if ga.Value.Title != "a2" || gb.Value != (Task{Title: "b2", Owner: "bob"}) {
		t.Fatalf("after the batch: %+v, %+v", ga.Value, gb.Value)
	}

	l.lose(0, 1)
	if _, err := tablestore.NewBatch(s).Merge(etagstore.Doc[Task]{Key: b.Key, Value: Task{N: 1}, ETag: gb.ETag}, "N").Submit(ctx); err != nil {
		t.Fatalf("batch lost before sending: %v, want it sent again", err)
	}
	if got, _ := clean.Get(ctx, b.Key); got.Value != (Task{Title: "b2", Owner: "bob", N: 1}) {
		t.Fatalf("after the batch sent again: %+v", got.Value)
	}

	l.lose(1, 0)
	_, err = tablestore.NewBatch(s).UpsertMerge(b.Key, Task{N: 2}, "N").Submit(ctx)
	var unknown *etagstore.OutcomeUnknownError
	if !errors.As(err, &unknown) {
		t.Fatalf("batch of a lost UpsertMerge = %v, want an OutcomeUnknownError", err)
	}
	for _, e := range []error{etagstore.ErrConflict, etagstore.ErrNotFound, etagstore.ErrExists, etagstore.ErrInvalidInput} {
		if errors.Is(err, e) {
			t.Errorf("outcome-unknown batch also matches %v", e)
		}
	}
}

// UpsertMerge carries no write id: a lost answer is an unknown outcome, and
// only that.
func TestUpsertMergeLostAnswer(t *testing.T) {
	ctx := t.Context()
	_, s, l := newLossyStores(t)
	l.lose(1, 0)
	_, err := tablestore.UpsertMerge(ctx, s, "p/k", Task{Title: "x"})
	var unknown *etagstore.OutcomeUnknownError
	if !errors.As(err, &unknown) || unknown.Op != "UpsertMerge" {
		t.Fatalf("UpsertMerge with a lost answer = %v, want an *OutcomeUnknownError", err)
	}
}
