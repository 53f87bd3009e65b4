package etagstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"

	"github.com/etagstore/etagstore/driver"
)

type counter struct{ N int }

// fakeClock advances by exactly the time slept; Sleep returns at once.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	sleeps  []time.Duration
	onSleep func()
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	hook := c.onSleep
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return ctx.Err()
}

// hookBackend wraps memstore and lets a test act between an Update's read
// and its write, as a concurrent writer would.
// hookBackend counts reads and writes (for assertions) and lets a test
// act on them. Hooks steer by behaviour: by what a request reads or
// writes, or by the role of the caller it serves (see as), never by its
// position in the sequence of requests.
type hookBackend struct {
	*memstore.Backend
	mu     sync.Mutex
	reads  int
	writes int
	// afterRead, if set, runs after each read with what it found.
	afterRead func(ctx context.Context, key string, it driver.Item, err error)
	// writeHook, if set, runs instead of the write; returning handled=false
	// forwards the write.
	writeHook func(ctx context.Context, key string, w driver.Write) (etag etagstore.ETag, err error, handled bool)
}

func (h *hookBackend) Read(ctx context.Context, key string) (driver.Item, error) {
	it, err := h.Backend.Read(ctx, key)
	h.mu.Lock()
	h.reads++
	hook := h.afterRead
	h.mu.Unlock()
	if hook != nil {
		hook(ctx, key, it, err)
	}
	return it, err
}

func (h *hookBackend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	h.mu.Lock()
	h.writes++
	hook := h.writeHook
	h.mu.Unlock()
	if hook != nil {
		if etag, err, handled := hook(ctx, key, w); handled {
			return etag, err
		}
	}
	return h.Backend.Write(ctx, key, w)
}

// roleKey is the context key of a caller's role.
type roleKey struct{}

// as tags ctx with the role of its caller ("solo", "held", ...), which the
// requests made for it carry (a group-commit batch's carry its first
// member's), so that a hook can tell whose request it sees.
func as(ctx context.Context, role string) context.Context {
	return context.WithValue(ctx, roleKey{}, role)
}

// role is the role ctx was tagged with ("" for none).
func role(ctx context.Context) string {
	r, _ := ctx.Value(roleKey{}).(string)
	return r
}

// nOf is the N a counter document's bytes hold (-1 when they hold none).
func nOf(data []byte) int {
	var c struct{ N *int }
	if json.Unmarshal(data, &c) != nil || c.N == nil {
		return -1
	}
	return *c.N
}

func newTestStore(t *testing.T, p etagstore.RetryPolicy) (*etagstore.Store[counter], *hookBackend, *fakeClock) {
	t.Helper()
	hb := &hookBackend{Backend: memstore.New(nil)}
	clock := newFakeClock()
	// No version cache: these tests steer the read each attempt starts from
	// (the cached path has tests and a conformance configuration of its own).
	return etagstore.New[counter](hb, &etagstore.Options{Retry: &p, Clock: clock, CacheSize: -1}), hb, clock
}

// interfere bumps the counter behind the Store's back, as another process would.
func interfere(t *testing.T, b driver.Backend, key string) {
	t.Helper()
	other := etagstore.New[counter](b, nil)
	if _, err := other.Update(context.Background(), key, func(c *counter) error { c.N += 100; return nil }); err != nil {
		t.Errorf("interfering update: %v", err)
	}
}

func TestUpdateRetriesConflicts(t *testing.T) {
	s, hb, clock := newTestStore(t, etagstore.RetryPolicy{})
	if _, err := s.Create(t.Context(), "k", counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	hb.afterRead = func(_ context.Context, _ string, it driver.Item, _ error) {
		if nOf(it.Data) < 200 { // the reads of N 1 and 101 go stale before the write
			interfere(t, hb.Backend, "k")
		}
	}
	calls := 0
	d, err := s.Update(t.Context(), "k", func(c *counter) error { calls++; c.N++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if d.Value.N != 202 || calls != 3 || len(clock.sleeps) != 2 {
		t.Fatalf("N = %d after %d mutate calls and %d sleeps, want 202, 3, 2", d.Value.N, calls, len(clock.sleeps))
	}
	// Full jitter: each delay below its exponentially growing cap.
	for i, d := range clock.sleeps {
		limit := 4 * time.Millisecond << i // the default InitialInterval
		if d < 0 || d >= limit {
			t.Errorf("sleep %d = %v, want in [0, %v)", i, d, limit)
		}
	}
}

func TestUpdateAttemptLimit(t *testing.T) {
	s, hb, clock := newTestStore(t, etagstore.RetryPolicy{MaxAttempts: 4, MaxElapsedTime: -1})
	if _, err := s.Create(t.Context(), "k", counter{}); err != nil {
		t.Fatal(err)
	}
	hb.afterRead = func(context.Context, string, driver.Item, error) { interfere(t, hb.Backend, "k") }
	_, err := s.Update(t.Context(), "k", func(c *counter) error { c.N = -1; return nil })
	var ce *etagstore.ConflictError[counter]
	if !errors.As(err, &ce) || !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("Update = %v, want *ConflictError", err)
	}
	if ce.Attempts != 4 || len(clock.sleeps) != 3 {
		t.Errorf("Attempts = %d with %d sleeps, want 4 and 3", ce.Attempts, len(clock.sleeps))
	}
	if ce.Mine.N != -1 || ce.Theirs.Value.N != 400 || ce.Key != "k" {
		// Each of the 4 attempts' reads was followed by an interfering +100.
		t.Errorf("ConflictError = %+v", ce)
	}
	if ce.Diff() == "" {
		t.Error("Diff() is empty")
	}
}

func TestUpdateElapsedLimit(t *testing.T) {
	s, hb, clock := newTestStore(t, etagstore.RetryPolicy{MaxAttempts: 1000, InitialInterval: time.Second, MaxInterval: time.Second, MaxElapsedTime: 5 * time.Second})
	if _, err := s.Create(t.Context(), "k", counter{}); err != nil {
		t.Fatal(err)
	}
	hb.afterRead = func(context.Context, string, driver.Item, error) { interfere(t, hb.Backend, "k") }
	_, err := s.Update(t.Context(), "k", func(c *counter) error { c.N++; return nil })
	if !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("Update = %v, want ErrConflict", err)
	}
	// No delay is scheduled past the 5 s budget (each cap is 1 s).
	var slept time.Duration
	for _, d := range clock.sleeps {
		slept += d
	}
	if len(clock.sleeps) == 0 || slept > 5*time.Second || len(clock.sleeps) >= 999 {
		t.Errorf("%d sleeps totalling %v, want some, within 5s", len(clock.sleeps), slept)
	}
}

func TestUpdateAbort(t *testing.T) {
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	if _, err := s.Create(t.Context(), "k", counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	hb.writes = 0
	boom := errors.New("refused by mutate")
	_, err := s.Update(t.Context(), "k", func(c *counter) error { c.N = 5; return boom })
	if err != boom {
		t.Fatalf("Update = %v, want the mutate error unchanged", err)
	}
	// A mutate error that happens to wrap ErrConflict is still an abort.
	calls := 0
	wrapped := errors.Join(etagstore.ErrConflict, boom)
	_, err = s.Update(t.Context(), "k", func(c *counter) error { calls++; return wrapped })
	if err != wrapped || calls != 1 {
		t.Fatalf("Update = %v after %d calls, want the mutate error after 1", err, calls)
	}
	if hb.writes != 0 {
		t.Fatalf("%d writes after aborted updates, want 0", hb.writes)
	}
}

func TestUpdateNoopSendsNoWrite(t *testing.T) {
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	created, err := s.Create(t.Context(), "k", counter{N: 3})
	if err != nil {
		t.Fatal(err)
	}
	hb.writes = 0
	d, err := s.Update(t.Context(), "k", func(c *counter) error { c.N = 3; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if hb.writes != 0 || d != created {
		t.Fatalf("no-op Update wrote %d times and returned %+v, want 0 and %+v", hb.writes, d, created)
	}
}

func TestUpdateContextCanceled(t *testing.T) {
	s, hb, clock := newTestStore(t, etagstore.RetryPolicy{})
	if _, err := s.Create(t.Context(), "k", counter{}); err != nil {
		t.Fatal(err)
	}
	hb.afterRead = func(context.Context, string, driver.Item, error) { interfere(t, hb.Backend, "k") }
	ctx, cancel := context.WithCancel(t.Context())
	clock.onSleep = cancel // cancelled while backing off
	_, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Update = %v, want context.Canceled", err)
	}
	if errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("Update = %v: a cancelled update is not a conflict", err)
	}
	// Already cancelled: nothing is read.
	hb.reads = 0
	if _, err := s.Update(ctx, "k", func(c *counter) error { return nil }); !errors.Is(err, context.Canceled) || hb.reads != 0 {
		t.Fatalf("Update(cancelled ctx) = %v after %d reads", err, hb.reads)
	}
}

func TestUpdateCreateIfMissingLosesRace(t *testing.T) {
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	hb.afterRead = func(_ context.Context, _ string, _ driver.Item, err error) {
		if errors.Is(err, etagstore.ErrNotFound) { // someone else creates the document after our read found none
			if _, err := etagstore.New[counter](hb.Backend, nil).Create(context.Background(), "k", counter{N: 10}); err != nil {
				t.Error(err)
			}
		}
	}
	var seen []int
	d, err := s.Update(t.Context(), "k", func(c *counter) error { seen = append(seen, c.N); c.N++; return nil }, etagstore.CreateIfMissing())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 10}, seen); diff != "" {
		t.Errorf("mutate saw (-want +got):\n%s", diff)
	}
	if d.Value.N != 11 {
		t.Fatalf("N = %d, want 11", d.Value.N)
	}
}

// A write that committed but came back as 412 (the SDK retried it after a
// lost response) is recognised by its write id: mutate is not applied twice.
func TestUpdateRecognisesOwnCommittedWrite(t *testing.T) {
	s, hb, _ := newTestStore(t, etagstore.RetryPolicy{})
	if _, err := s.Create(t.Context(), "k", counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	landed := 0
	hb.writeHook = func(_ context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
		if nOf(w.Data) != 2 { // the Update's write of N 2 lands, and its answer is lost
			return "", nil, false
		}
		landed++
		if _, err := hb.Backend.Write(context.Background(), key, w); err != nil {
			t.Fatal(err)
		}
		return "", etagstore.ErrConflict, true // the retry's 412
	}
	calls := 0
	d, err := s.Update(t.Context(), "k", func(c *counter) error { calls++; c.N++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := s.Get(t.Context(), "k")
	if d.Value.N != 2 || stored.Value.N != 2 || calls != 1 || d.ETag != stored.ETag || landed != 1 {
		t.Fatalf("Update = %+v (stored %+v) after %d mutate calls and %d landed writes answered 412; want N 2 once, one such write", d, stored, calls, landed)
	}
}

func TestNilOptionsAreDefaults(t *testing.T) {
	s := etagstore.New[counter](memstore.New(nil), nil)
	d, err := s.Update(t.Context(), "k", func(c *counter) error { c.N = 7; return nil }, etagstore.CreateIfMissing())
	if err != nil || d.Value.N != 7 {
		t.Fatalf("Update = %+v, %v", d, err)
	}
}

func TestMergeFields(t *testing.T) {
	type inner struct{ A, B string }
	type doc struct {
		Title string
		Tags  []string
		In    inner
		When  time.Time
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := doc{Title: "t", Tags: []string{"a"}, In: inner{"a", "b"}, When: t0}
	for _, tc := range []struct {
		name         string
		mine, theirs doc
		want         doc
		conflicts    []string
	}{
		{"disjoint", doc{Title: "mine", Tags: []string{"a"}, In: inner{"a", "b"}, When: t0}, doc{Title: "t", Tags: []string{"a", "x"}, In: inner{"a", "b"}, When: t0},
			doc{Title: "mine", Tags: []string{"a", "x"}, In: inner{"a", "b"}, When: t0}, nil},
		{"nested disjoint", doc{Title: "t", Tags: []string{"a"}, In: inner{"A", "b"}, When: t0}, doc{Title: "t", Tags: []string{"a"}, In: inner{"a", "B"}, When: t0},
			doc{Title: "t", Tags: []string{"a"}, In: inner{"A", "B"}, When: t0}, nil},
		{"same change", doc{Title: "same", Tags: []string{"a"}, In: inner{"a", "b"}, When: t0}, doc{Title: "same", Tags: []string{"a"}, In: inner{"a", "b"}, When: t0},
			doc{Title: "same", Tags: []string{"a"}, In: inner{"a", "b"}, When: t0}, nil},
		{"overlap", doc{Title: "m", Tags: []string{"m"}, In: inner{"m", "b"}, When: t0.Add(time.Hour)}, doc{Title: "o", Tags: []string{"o"}, In: inner{"o", "b"}, When: t0.Add(2 * time.Hour)},
			doc{}, []string{"Title", "Tags", "In.A", "When"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := etagstore.MergeFields(base, tc.mine, tc.theirs)
			if tc.conflicts != nil {
				var me *etagstore.MergeError
				if !errors.As(err, &me) || !errors.Is(err, etagstore.ErrConflict) {
					t.Fatalf("MergeFields = %v, want *MergeError", err)
				}
				if diff := cmp.Diff(tc.conflicts, me.Fields); diff != "" {
					t.Errorf("conflicting fields (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
		})
	}
	// A non-struct document is one field.
	if _, err := etagstore.MergeFields("base", "mine", "theirs"); !errors.Is(err, etagstore.ErrConflict) {
		t.Errorf("MergeFields on strings = %v, want conflict", err)
	}
	if got, err := etagstore.MergeFields("base", "base", "theirs"); err != nil || got != "theirs" {
		t.Errorf("MergeFields on strings = %q, %v", got, err)
	}
}

func TestSaveMergeRetriesAfterSecondConflict(t *testing.T) {
	type page struct{ Title, Body string }
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[page](hb, &etagstore.Options{Clock: newFakeClock()})
	base, err := s.Create(t.Context(), "p", page{Title: "t", Body: "b"})
	if err != nil {
		t.Fatal(err)
	}
	other := etagstore.New[page](hb.Backend, nil)
	if _, err := other.Update(t.Context(), "p", func(p *page) error { p.Title = "T1"; return nil }); err != nil {
		t.Fatal(err)
	}
	hb.afterRead = func(_ context.Context, _ string, it driver.Item, _ error) {
		var p page
		if json.Unmarshal(it.Data, &p) == nil && p.Title == "T1" { // theirs moves again between Save's read and its merged write
			if _, err := other.Update(context.Background(), "p", func(p *page) error { p.Title = "T2"; return nil }); err != nil {
				t.Error(err)
			}
		}
	}
	hb.reads = 0
	d, err := s.Save(t.Context(), base, page{Title: "t", Body: "mine"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Value != (page{Title: "T2", Body: "mine"}) {
		t.Fatalf("Save = %+v, want T2/mine", d.Value)
	}
}

func TestCacheWritesWithoutReading(t *testing.T) {
	hb := &hookBackend{Backend: memstore.New(nil)}
	s := etagstore.New[counter](hb, &etagstore.Options{CacheSize: 8, Clock: newFakeClock()})
	if _, err := s.Create(t.Context(), "k", counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	hb.reads, hb.writes = 0, 0
	for range 3 {
		if _, err := s.Update(t.Context(), "k", func(c *counter) error { c.N++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if hb.reads != 0 || hb.writes != 3 {
		t.Fatalf("3 cached Updates made %d reads and %d writes, want 0 and 3", hb.reads, hb.writes)
	}
	// Another writer makes the copy stale: one failed write, one read, one write.
	interfere(t, hb.Backend, "k")
	hb.reads, hb.writes = 0, 0
	d, err := s.Update(t.Context(), "k", func(c *counter) error { c.N++; return nil })
	if err != nil || d.Value.N != 105 {
		t.Fatalf("Update after interference = %+v, %v; want N 105", d, err)
	}
	if hb.reads != 1 || hb.writes != 2 {
		t.Fatalf("stale cache: %d reads and %d writes, want 1 and 2", hb.reads, hb.writes)
	}
	// A no-op against the copy is checked against the stored version.
	interfere(t, hb.Backend, "k")
	d, err = s.Update(t.Context(), "k", func(c *counter) error { return nil })
	if err != nil || d.Value.N != 205 {
		t.Fatalf("no-op Update after interference = %+v, %v; want the stored N 205", d, err)
	}
}

// opaque hides a backend's optional interfaces (Verbatim among them).
type opaque struct{ driver.Backend }

// A mutation through a map or pointer that the decoded value shares must
// still be written, whether or not the backend hands data back verbatim.
func TestUpdateThroughSharedReferences(t *testing.T) {
	type doc struct {
		Tags map[string]int
		Ptr  *int
	}
	for name, b := range map[string]driver.Backend{"verbatim": memstore.New(nil), "relayout": opaque{memstore.New(nil)}} {
		t.Run(name, func(t *testing.T) {
			s := etagstore.New[doc](b, nil)
			one := 1
			if _, err := s.Create(t.Context(), "k", doc{Tags: map[string]int{"a": 1}, Ptr: &one}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Update(t.Context(), "k", func(d *doc) error { d.Tags["b"] = 2; *d.Ptr = 5; return nil }); err != nil {
				t.Fatal(err)
			}
			got, _ := s.Get(t.Context(), "k")
			if got.Value.Tags["b"] != 2 || *got.Value.Ptr != 5 {
				t.Fatalf("stored %+v: the mutation was taken for a no-op", got.Value)
			}
		})
	}
}

// A key that keeps losing races starts its backoff higher next time; one
// that is won at once cools down again.
func TestBackoffAdaptsToContention(t *testing.T) {
	s, hb, clock := newTestStore(t, etagstore.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: time.Second})
	if _, err := s.Create(t.Context(), "k", counter{}); err != nil {
		t.Fatal(err)
	}
	firstSleepCap := func() time.Duration {
		t.Helper()
		clock.sleeps = nil
		d, err := s.Get(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		hb.afterRead = func(_ context.Context, _ string, it driver.Item, _ error) {
			if nOf(it.Data) == d.Value.N { // the Update's read of the current N goes stale
				interfere(t, hb.Backend, "k")
			}
		}
		if _, err := s.Update(t.Context(), "k", func(c *counter) error { c.N++; return nil }); err != nil {
			t.Fatal(err)
		}
		if len(clock.sleeps) != 1 {
			t.Fatalf("%d sleeps, want 1", len(clock.sleeps))
		}
		return clock.sleeps[0]
	}
	// Sleeps are jittered in [0, cap): the largest of many tells the cap.
	maxOf := func(n int) time.Duration {
		var m time.Duration
		for range n {
			m = max(m, firstSleepCap())
		}
		return m
	}
	cold := maxOf(1)
	hot := maxOf(30) // 30 contended Updates in a row: the key is as hot as it gets
	if cold >= time.Millisecond || hot < 4*time.Millisecond || hot >= 32*time.Millisecond {
		t.Fatalf("first backoff cap: cold %v (want < 1ms), hot %v (want within [4ms, 32ms))", cold, hot)
	}
}

// slowBackend makes every write take a while, so that group-commit batches
// form and callers wait in the queue. In a synctest bubble the while is on
// the bubble's fake clock: it ends only when every other goroutine of the
// bubble is blocked, so the latency models a slow server without making
// the outcome depend on the machine's speed.
type slowBackend struct {
	driver.Backend
	delay time.Duration
}

func (s slowBackend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	time.Sleep(s.delay)
	return s.Backend.Write(ctx, key, w)
}

// Callers that give up while queued or while their batch is written return
// promptly with their context's error; the others are unaffected, nobody is
// left waiting, and every increment that reported success is stored once.
// The writes' latency and the callers' deadlines run on a synctest bubble's
// fake clock, so where each deadline falls does not depend on the machine.
func TestGroupCommitCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		s := etagstore.New[counter](slowBackend{memstore.New(nil), 2 * time.Millisecond}, nil)
		var ok, canceled, unknown atomic.Int64
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				ctx := t.Context()
				if i%3 == 0 { // a third give up after a random short while
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*time.Millisecond)
					defer cancel()
				}
				for range 5 {
					_, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil }, etagstore.CreateIfMissing())
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, etagstore.ErrOutcomeUnknown):
						var ue *etagstore.OutcomeUnknownError
						if !errors.As(err, &ue) || !errors.Is(ue.Cause, context.DeadlineExceeded) {
							t.Errorf("unknown outcome %v, want an *OutcomeUnknownError caused by the deadline", err)
						}
						unknown.Add(1)
					case errors.Is(err, context.DeadlineExceeded):
						canceled.Add(1)
					default:
						t.Errorf("Update: %v", err)
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("callers still waiting after 30 s: a batch was never led")
		}
		d, err := s.Get(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if int64(d.Value.N) < ok.Load() || int64(d.Value.N) > ok.Load()+unknown.Load() {
			t.Fatalf("N = %d with %d successes and %d unknown outcomes", d.Value.N, ok.Load(), unknown.Load())
		}
		if canceled.Load() == 0 {
			t.Log("no caller was cancelled while queued this time")
		}
		t.Logf("%d ok, %d cancelled, %d unknown, N = %d", ok.Load(), canceled.Load(), unknown.Load(), d.Value.N)
	})
}

// A write whose answer was lost, judged against the window the document
// holds: Store A (16 ids) commits a write whose answer is lost; Store B,
// keeping 1 id, then makes two Updates before A reads. A's slot has left
// the document's window, so A cannot tell and must say so; the counter
// rises by exactly 3 either way, never by 4.
func TestLostWriteJudgedByTheDocumentsWindow(t *testing.T) {
	ctx := t.Context()
	hb := &hookBackend{Backend: memstore.New(nil)}
	a := etagstore.New[counter](hb, &etagstore.Options{KeepWriteIDs: 16, DisableGroupCommit: true})
	b := etagstore.New[counter](hb.Backend, &etagstore.Options{KeepWriteIDs: 1})
	if _, err := a.Create(ctx, "k", counter{}); err != nil {
		t.Fatal(err)
	}
	hb.writeHook = func(_ context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
		if nOf(w.Data) != 1 { // a's write of N 1: it lands, b writes twice, and its answer is lost
			return "", nil, false
		}
		if _, err := hb.Backend.Write(ctx, key, w); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := b.Update(ctx, key, func(c *counter) error { c.N++; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		return "", errors.New("connection reset"), true // the answer is lost
	}
	_, err := a.Update(ctx, "k", func(c *counter) error { c.N++; return nil })
	var ue *etagstore.OutcomeUnknownError
	if !errors.As(err, &ue) || ue.Op != "Update" || ue.Key != "k" {
		t.Fatalf("Update = %v, want an *OutcomeUnknownError for Update of k", err)
	}
	if d, _ := b.Get(ctx, "k"); d.Value.N != 3 {
		t.Fatalf("N = %d, want 3", d.Value.N)
	}
}

// A value the codec cannot encode fails only its own caller, also when it
// rides in a batch, and matches ErrInvalidInput.
func TestUnencodableValueFailsItsOwnCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		type doc struct{ X float64 }
		ctx := t.Context()
		release := make(chan struct{})
		b := gateBackend{memstore.New(nil), release}
		s := etagstore.New[doc](b, nil)
		var wg sync.WaitGroup
		results := make([]error, 8)
		for i := range results {
			wg.Go(func() {
				_, results[i] = s.Update(ctx, "k", func(d *doc) error {
					if i == 5 {
						d.X = math.NaN()
						return nil
					}
					d.X++
					return nil
				}, etagstore.CreateIfMissing())
			})
			if i == 0 {
				synctest.Wait() // the first caller's write is held: the others queue, NaN among them
			}
		}
		synctest.Wait() // all have queued behind the first write
		close(release)
		wg.Wait()
		for i, err := range results {
			switch {
			case i == 5 && !errors.Is(err, etagstore.ErrInvalidInput):
				t.Errorf("NaN: Update = %v, want ErrInvalidInput", err)
			case i != 5 && err != nil:
				t.Errorf("Update %d: %v", i, err)
			}
		}
		if d, _ := s.Get(ctx, "k"); d.Value.X != 7 {
			t.Fatalf("X = %v, want 7", d.Value.X)
		}
	})
}

// gateBackend holds every write until release is closed.
type gateBackend struct {
	*memstore.Backend
	release chan struct{}
}

func (g gateBackend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	<-g.release
	return g.Backend.Write(ctx, key, w)
}

// Save with nothing to change confirms the document is still there: a
// deleted one matches ErrNotFound, a changed one returns the current
// version, never the stale base.
func TestSaveUnchangedConfirms(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[counter](memstore.New(nil), nil)
	base, err := s.Create(ctx, "k", counter{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.Save(ctx, base, base.Value, nil); err != nil || d != base {
		t.Fatalf("Save(unchanged) = %+v, %v; want %+v", d, err, base)
	}
	cur, err := s.Update(ctx, "k", func(c *counter) error { c.N = 2; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.Save(ctx, base, base.Value, nil); err != nil || d != cur {
		t.Fatalf("Save(unchanged, stale base) = %+v, %v; want the current %+v", d, err, cur)
	}
	if err := s.Delete(ctx, "k", cur.ETag); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Save(ctx, cur, cur.Value, nil); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Save(unchanged) of a deleted document = %+v, %v; want ErrNotFound", d, err)
	}
}

// A caller whose context ends while its mutate runs gets its context's
// error: nothing was sent for it.
func TestContextEndedDuringMutateIsNotUnknown(t *testing.T) {
	s := etagstore.New[counter](memstore.New(nil), nil)
	ctx, cancel := context.WithCancel(t.Context())
	_, err := s.Update(ctx, "k", func(c *counter) error { cancel(); c.N++; return nil }, etagstore.CreateIfMissing())
	if !errors.Is(err, context.Canceled) || errors.Is(err, etagstore.ErrOutcomeUnknown) {
		t.Fatalf("Update = %v, want context.Canceled and not unknown", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
}

// stepBackend counts reads and holds every write until the test lets it
// through, telling the test when one arrives.
type stepBackend struct {
	*memstore.Backend
	reads   atomic.Int64
	arrived chan int      // the number of each write as it arrives
	pass    chan struct{} // one token lets one write through
	writes  atomic.Int64
}

func newStepBackend() *stepBackend {
	return &stepBackend{Backend: memstore.New(nil), arrived: make(chan int, 16), pass: make(chan struct{})}
}

func (b *stepBackend) Read(ctx context.Context, key string) (driver.Item, error) {
	b.reads.Add(1)
	return b.Backend.Read(ctx, key)
}

func (b *stepBackend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	b.arrived <- int(b.writes.Add(1))
	<-b.pass
	return b.Backend.Write(ctx, key, w)
}

// updates starts n Updates incrementing k's counter, each sending the value
// it got on vals, and returns once each is held or queued: every goroutine
// of the synctest bubble it runs in is blocked.
func updates(t *testing.T, s *etagstore.Store[counter], n int, vals chan<- int, wg *sync.WaitGroup) {
	for range n {
		wg.Go(func() {
			d, err := s.Update(t.Context(), "k", func(c *counter) error { c.N++; return nil }, etagstore.CreateIfMissing())
			if err != nil {
				t.Error(err)
			}
			vals <- d.Value.N
		})
	}
	synctest.Wait()
}

// Back-to-back group-commit batches: the second starts from the version the
// first wrote and sends no read. Without the version cache the first batch
// reads; with it (the default), it starts from the version the Update
// before it wrote.
func TestGroupCommitChainsBatches(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  *etagstore.Options
		reads int64
	}{{"NoCache", &etagstore.Options{CacheSize: -1}, 2}, {"Default", nil, 1}} {
		t.Run(c.name, func(t *testing.T) { chainBatches(t, c.opts, c.reads) })
	}
}

func chainBatches(t *testing.T, opts *etagstore.Options, wantReads int64) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		b := newStepBackend()
		s := etagstore.New[counter](b, opts)
		vals := make(chan int, 16)
		var wg sync.WaitGroup
		updates(t, s, 1, vals, &wg) // alone: read 1, write 1 (held)
		<-b.arrived
		updates(t, s, 3, vals, &wg) // queue behind it
		b.pass <- struct{}{}
		<-b.arrived // batch 1: read 2 (without the cache), write 2 (held)
		updates(t, s, 3, vals, &wg)
		b.pass <- struct{}{}
		<-b.arrived // batch 2: write 3, with no read
		b.pass <- struct{}{}
		wg.Wait()
		close(vals)
		if got := b.reads.Load(); got != wantReads {
			t.Errorf("%d reads for 3 writes, want %d (the second batch chains on the first's version)", got, wantReads)
		}
		seen := map[int]bool{}
		for v := range vals {
			seen[v] = true
		}
		if len(seen) != 7 || !seen[1] || !seen[7] {
			t.Errorf("values returned: %v, want 1..7 each once", seen)
		}
	})
}

// A chained batch whose version another Store has moved on gets 412, reads,
// re-applies its mutations and lands each exactly once.
func TestChainedBatchLosesToAnotherStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		b := newStepBackend()
		s := etagstore.New[counter](b, &etagstore.Options{CacheSize: -1}) // batch 1 reads
		other := etagstore.New[counter](b.Backend, nil)
		vals := make(chan int, 16)
		var wg sync.WaitGroup
		updates(t, s, 1, vals, &wg)
		<-b.arrived
		updates(t, s, 3, vals, &wg)
		b.pass <- struct{}{}
		<-b.arrived // batch 1's write
		updates(t, s, 3, vals, &wg)
		b.pass <- struct{}{}
		<-b.arrived // batch 2's chained write, held while the other Store writes
		if _, err := other.Update(t.Context(), "k", func(c *counter) error { c.N += 100; return nil }); err != nil {
			t.Fatal(err)
		}
		b.pass <- struct{}{} // 412
		<-b.arrived          // after a read, batch 2 again
		b.pass <- struct{}{}
		wg.Wait()
		close(vals)
		if got := b.reads.Load(); got != 3 {
			t.Errorf("%d reads, want 3", got)
		}
		var got []int
		for v := range vals {
			got = append(got, v)
		}
		slices.Sort(got)
		if diff := cmp.Diff([]int{1, 2, 3, 4, 105, 106, 107}, got); diff != "" {
			t.Errorf("values returned (-want +got):\n%s", diff)
		}
		if d, _ := other.Get(t.Context(), "k"); d.Value.N != 107 {
			t.Errorf("N = %d, want 107", d.Value.N)
		}
	})
}

// busyBackend refuses the first write and the first delete of each key
// unapplied (Azure's 503 ServerBusy, driver.ErrNotApplied).
type busyBackend struct {
	*memstore.Backend
	mu   sync.Mutex
	seen map[string]bool
}

func (b *busyBackend) busy(op, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[op+key] {
		return false
	}
	b.seen[op+key] = true
	return true
}

func (b *busyBackend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	if b.busy("w", key) {
		return "", fmt.Errorf("%w: server busy", driver.ErrNotApplied)
	}
	return b.Backend.Write(ctx, key, w)
}

func (b *busyBackend) Delete(ctx context.Context, key string, etag etagstore.ETag) error {
	if b.busy("d", key) {
		return fmt.Errorf("%w: server busy", driver.ErrNotApplied)
	}
	return b.Backend.Delete(ctx, key, etag)
}

// A write refused unapplied (throttled) is sent again after a pause: even
// writes whose lost answer could never be settled (a create, an upsert, a
// delete of whatever is there) succeed, once.
func TestThrottledWritesAreRetried(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[counter](&busyBackend{Backend: memstore.New(nil), seen: map[string]bool{}}, nil)
	if _, err := s.Create(ctx, "c", counter{N: 1}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := s.Upsert(ctx, "u", counter{N: 2}); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	if d, err := s.Update(ctx, "n", func(c *counter) error { c.N++; return nil }, etagstore.CreateIfMissing()); err != nil || d.Value.N != 1 {
		t.Fatalf("Update(CreateIfMissing) = %+v, %v", d, err)
	}
	if err := s.Delete(ctx, "c", etagstore.ETagAny); err != nil {
		t.Fatalf("Delete(*): %v", err)
	}
	if _, err := s.Get(ctx, "c"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
}
