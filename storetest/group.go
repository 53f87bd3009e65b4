package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// The group-commit cases: concurrent Updates of one key in one Store share
// writes, yet each caller gets its own result, its own errors and its own
// deadline, and user code that panics, blocks or calls back in affects only
// its own caller.

// testIDAllocator: 64 goroutines take ids from a counter with Update; each
// gets the counter's value right after its own increment, so the ids are
// 1..64, each once.
func testIDAllocator(t *testing.T, s *etagstore.Store[Page]) {
	const callers = 64
	ctx := t.Context()
	ids := make([]int64, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			d, err := s.Update(ctx, "next-id", func(p *Page) error { p.N++; return nil }, etagstore.CreateIfMissing())
			if err != nil {
				t.Errorf("Update: %v", err)
				return
			}
			ids[i] = d.Value.N
		})
	}
	wg.Wait()
	slices.Sort(ids)
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("ids handed out (sorted): %v; want 1..%d, each once", ids, callers)
		}
	}
	wantValue(t, s, "next-id", callers)
}

// testNestedUpdate: a mutate that writes its own key (a nested Update,
// Replace, Upsert or Delete of the same key of the same Store, with group
// commit on or off) fails its Update at once, with an error matching
// ErrInvalidInput alone, instead of retrying until its policy ends: the
// nested write lands once, mutate runs once, and the key holds what the
// nested write made. Each case is bounded at a second.
func testNestedUpdate(t *testing.T, s *etagstore.Store[Page]) {
	nested := []struct {
		name  string
		write func(ctx context.Context, s *etagstore.Store[Page]) error
		want  int64 // -1: deleted
	}{
		{"Update", func(ctx context.Context, s *etagstore.Store[Page]) error {
			_, err := s.Update(ctx, "n", func(p *Page) error { p.N += 10; return nil })
			return err
		}, 10},
		{"Replace", func(ctx context.Context, s *etagstore.Store[Page]) error {
			d, err := s.Get(ctx, "n")
			if err != nil {
				return err
			}
			d.Value.N += 10
			_, err = s.Replace(ctx, d)
			return err
		}, 10},
		{"Upsert", func(ctx context.Context, s *etagstore.Store[Page]) error {
			_, err := s.Upsert(ctx, "n", Page{N: 10})
			return err
		}, 10},
		{"Delete", func(ctx context.Context, s *etagstore.Store[Page]) error {
			return s.Delete(ctx, "n", etagstore.ETagAny)
		}, -1},
	}
	ungrouped := etagstore.New[Page](s.Backend(), &etagstore.Options{DisableGroupCommit: true})
	for _, st := range []struct {
		name string
		s    *etagstore.Store[Page]
	}{{"Grouped", s}, {"Ungrouped", ungrouped}} {
		for _, w := range nested {
			t.Run(st.name+"/"+w.name, func(t *testing.T) {
				s := st.s
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				if _, err := s.Upsert(ctx, "n", Page{}); err != nil {
					t.Fatal(err)
				}
				runs := 0
				var inner error
				_, err := s.Update(ctx, "n", func(p *Page) error {
					runs++
					if inner = w.write(ctx, s); inner != nil {
						return inner
					}
					p.N++
					return nil
				})
				if !errors.Is(err, etagstore.ErrInvalidInput) {
					t.Fatalf("outer Update: %v; want ErrInvalidInput at once (its mutate wrote its own key)", err)
				}
				wantOneSentinel(t, err)
				if runs != 1 || inner != nil {
					t.Errorf("mutate ran %d times, the nested write last returned %v; want once, and nil", runs, inner)
				}
				if w.want < 0 {
					if _, err := s.Get(ctx, "n"); !errors.Is(err, etagstore.ErrNotFound) {
						t.Errorf("after the nested Delete, Get: %v; want ErrNotFound", err)
					}
					return
				}
				wantValue(t, s, "n", w.want)
			})
		}
	}
}

// testPanickingMutate: a mutate that panics (recovered by its caller, as
// net/http recovers a handler's panic) fails only that caller; concurrent
// Updates of the key succeed, none is reported unknown, and the key stays
// usable.
func testPanickingMutate(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	const rounds, others = 5, 8
	var ok atomic.Int64
	for range rounds {
		var wg sync.WaitGroup
		for i := range others + 1 {
			wg.Go(func() {
				if i == others/2 {
					defer func() {
						if r := recover(); r == nil {
							t.Error("a panicking mutate returned normally")
						}
					}()
					_, err := s.Update(ctx, "p", func(p *Page) error { panic("boom") }, etagstore.CreateIfMissing())
					t.Errorf("Update with a panicking mutate returned %v", err)
					return
				}
				if _, err := s.Update(ctx, "p", func(p *Page) error { p.N++; return nil }, etagstore.CreateIfMissing()); err != nil {
					t.Errorf("Update beside a panicking one: %v", err)
					return
				}
				ok.Add(1)
			})
		}
		wg.Wait()
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := s.Update(short, "p", func(p *Page) error { p.N++; return nil })
	if err != nil {
		t.Fatalf("Update after the panics: %v (the key is wedged)", err)
	}
	if d.Value.N != ok.Load()+1 {
		t.Fatalf("N = %d after %d successful increments", d.Value.N, ok.Load()+1)
	}
}

// testBlockedMutate: while one caller's mutate is blocked, other Updates
// of the same key complete, and a caller whose context ends returns by it;
// the blocked caller's mutation lands once after it is released. The
// blocked caller runs alone (the first on an idle key) or is a member of a
// batch (it arrives while another caller's mutate runs).
func testBlockedMutate(t *testing.T, s *etagstore.Store[Page]) {
	t.Run("Alone", func(t *testing.T) { blockedMutate(t, s, "b1", false) })
	t.Run("InBatch", func(t *testing.T) { blockedMutate(t, s, "b2", true) })
}

func blockedMutate(t *testing.T, s *etagstore.Store[Page], key string, batched bool) {
	ctx := t.Context()
	mustCreate(t, s, key, Page{})
	var wg sync.WaitGroup
	extra := int64(0)
	entered := make(chan struct{}) // closed when the blocked caller's mutate first runs
	// In a batch: a slow first caller, during whose mutate the blocked one arrives.
	if batched {
		extra = 1
		slowIn := make(chan struct{})
		wg.Go(func() {
			_, err := s.Update(ctx, key, func(p *Page) error {
				select {
				case <-slowIn:
				default:
					close(slowIn)
					// Stay in the mutate until the caller arriving meanwhile
					// has been served (in a batch) and is blocked in its own.
					select {
					case <-entered:
					case <-time.After(30 * time.Second):
						t.Error("a caller arriving during another's mutate waits for that mutate to return")
					}
				}
				p.N++
				return nil
			})
			if err != nil {
				t.Errorf("slow Update: %v", err)
			}
		})
		<-slowIn
	}
	release := make(chan struct{})
	var first sync.Once
	blocked := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, key, func(p *Page) error {
			runs := false
			first.Do(func() { runs = true })
			if runs { // only the first run blocks
				close(entered)
				<-release
			}
			p.N += 100
			return nil
		})
		blocked <- err
	}()
	<-entered
	const others = 8
	for range others {
		wg.Go(func() {
			if _, err := s.Update(ctx, key, func(p *Page) error { p.N++; return nil }); err != nil {
				t.Errorf("Update beside a blocked mutate: %v", err)
			}
		})
	}
	// A caller with a deadline returns by it, whatever it waits for.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.Update(short, key, func(p *Page) error { p.N += 1000; return nil }); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, etagstore.ErrOutcomeUnknown) {
		t.Errorf("Update with a deadline = %v", err)
	}
	othersDone := make(chan struct{})
	go func() { wg.Wait(); close(othersDone) }()
	select {
	case <-othersDone:
	case <-time.After(30 * time.Second):
		t.Fatal("Updates of a key wait for another caller's blocked mutate")
	}
	close(release)
	if err := <-blocked; err != nil {
		t.Fatalf("the blocked Update: %v", err)
	}
	d, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Value.N % 1000; n != 100+others+extra {
		t.Fatalf("N = %d, want %d (+1000 if the deadline caller landed)", d.Value.N, 100+others+extra)
	}
}

// testOwnFailure: in concurrent Updates of one key, a mutation that makes
// the document too large or returns an error fails only its own caller.
func testOwnFailure(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	big := strings.Repeat("x", 8<<20)
	boom := errors.New("refused")
	var ok atomic.Int64
	for range 4 {
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				_, err := s.Update(ctx, "f", func(p *Page) error {
					switch i {
					case 3:
						p.Body = big
					case 7:
						p.N = -1
						return boom
					default:
						p.N++
					}
					return nil
				}, etagstore.CreateIfMissing())
				switch {
				case i == 3:
					if !errors.Is(err, etagstore.ErrTooLarge) {
						t.Errorf("too large: Update = %v, want ErrTooLarge", err)
					}
				case i == 7:
					if !errors.Is(err, boom) {
						t.Errorf("failing mutate: Update = %v, want its own error", err)
					}
				case err != nil:
					t.Errorf("Update beside failing ones: %v", err)
				default:
					ok.Add(1)
				}
			})
		}
		wg.Wait()
	}
	wantValue(t, s, "f", ok.Load())
}

// testOneSentinel: the failures of every path match exactly one of the
// package's sentinels.
func testOneSentinel(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	d := mustCreate(t, s, "s", Page{N: 1})
	cur, err := s.Update(ctx, "s", func(p *Page) error { p.N++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	errs := map[string]error{}
	_, errs["Get missing"] = s.Get(ctx, "none")
	_, errs["Create existing"] = s.Create(ctx, "s", Page{})
	_, errs["Replace stale"] = s.Replace(ctx, d)
	_, errs["Replace missing"] = s.Replace(ctx, etagstore.Doc[Page]{Key: "none", ETag: d.ETag})
	_, errs["Replace no ETag"] = s.Replace(ctx, etagstore.Doc[Page]{Key: "s"})
	_, errs["Update missing"] = s.Update(ctx, "none", func(*Page) error { return nil })
	_, errs["Update bad key"] = s.Update(ctx, "", func(*Page) error { return nil })
	_, errs["Update too large"] = s.Update(ctx, "s", func(p *Page) error { p.Body = strings.Repeat("x", 8<<20); return nil })
	_, errs["Upsert fenced"] = s.Upsert(etagstore.WithFence(ctx, 1), "s", Page{})
	_, errs["Save stale overlap"] = s.Save(ctx, d, Page{N: 7}, nil)
	errs["Delete stale"] = s.Delete(ctx, "s", d.ETag)
	errs["Delete missing"] = s.Delete(ctx, "none", etagstore.ETagAny)
	errs["Delete no ETag"] = s.Delete(ctx, "s", "")
	if _, err := s.Update(etagstore.WithFence(ctx, 9), "s", func(p *Page) error { p.Title = "fenced"; return nil }); err != nil {
		t.Fatal(err)
	}
	_, errs["Update fenced"] = s.Update(etagstore.WithFence(ctx, 3), "s", func(p *Page) error { p.N++; return nil })
	one := etagstore.New[Page](s.Backend(), &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}, DisableGroupCommit: true})
	_, errs["Update out of attempts"] = one.Update(ctx, "s", func(p *Page) error {
		if p.N < 100 { // someone else writes between the read and the write
			if _, err := s.Update(ctx, "s", func(p *Page) error { p.N += 100; return nil }); err != nil {
				return err
			}
		}
		p.N++
		return nil
	})
	_ = cur
	for path, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", path)
			continue
		}
		wantOneSentinel(t, fmt.Errorf("%s: %w", path, err))
	}
}

var sentinels = []error{etagstore.ErrNotFound, etagstore.ErrStorageNotFound, etagstore.ErrExists, etagstore.ErrConflict, etagstore.ErrETagRequired,
	etagstore.ErrInvalidKey, etagstore.ErrTooLarge, etagstore.ErrInvalidInput, etagstore.ErrFenced,
	etagstore.ErrLocked, etagstore.ErrLockLost, etagstore.ErrOutcomeUnknown, etagstore.ErrUnavailable}

// wantOneSentinel fails t unless err matches exactly one of the package's
// sentinels.
func wantOneSentinel(t *testing.T, err error) {
	t.Helper()
	wantOneLine(t, err)
	var matched []error
	for _, s := range sentinels {
		if errors.Is(err, s) {
			matched = append(matched, s)
		}
	}
	if len(matched) != 1 {
		t.Errorf("%v matches %d sentinels %v; want exactly one", err, len(matched), matched)
	}
}

// wantValue checks the counter stored under key.
func wantValue(t *testing.T, s *etagstore.Store[Page], key string, n int64) {
	t.Helper()
	d, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if d.Value.N != n {
		t.Fatalf("%q holds N = %d, want %d", key, d.Value.N, n)
	}
}

// testSupersededETag: every Doc an Update returns has an ETag. One that
// was not the last of its group-commit batch has a superseded ETag; a
// Replace, Delete or transaction with it is answered as with any stale
// ETag, a *ConflictError holding the current document (never
// ErrETagRequired), and changes nothing. The backend itself refuses a
// condition on it as a conflict, sending nothing.
func testSupersededETag(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	mustCreate(t, s, "sup", Page{})
	var stale []etagstore.Doc[Page]
	total := int64(0)
	for round := 0; round < 200 && len(stale) == 0; round++ { // until some Updates share a batch
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				d, err := s.Update(ctx, "sup", func(p *Page) error { p.N++; return nil })
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("Update: %v", err)
				case d.ETag == "":
					t.Errorf("Update returned an empty ETag (N = %d)", d.Value.N)
				case driver.IsSuperseded(d.ETag):
					stale = append(stale, d)
				}
			})
		}
		wg.Wait()
		total += 16
	}
	if len(stale) == 0 {
		t.Fatal("no two Updates shared a group-commit batch in 200 rounds of 16")
	}
	cur, err := s.Get(ctx, "sup")
	if err != nil || cur.Value.N != total {
		t.Fatalf("Get = %+v, %v; want N = %d", cur.Value, err, total)
	}
	d := stale[0]
	var ce *etagstore.ConflictError[Page]
	d.Value.Title = "lost"
	if _, err := s.Replace(ctx, d); !errors.As(err, &ce) || ce.Theirs.ETag != cur.ETag || ce.Theirs.Value.N != total {
		t.Errorf("Replace with the superseded ETag %s = %v; want a *ConflictError with the current version", d.ETag, err)
	}
	if err := s.Delete(ctx, "sup", d.ETag); !errors.As(err, &ce) || ce.Theirs.ETag != cur.ETag {
		t.Errorf("Delete with the superseded ETag = %v; want a *ConflictError with the current version", err)
	}
	if _, err := s.Replace(etagstore.WithFence(ctx, 1), d); !errors.As(err, &ce) || ce.Theirs.ETag != cur.ETag {
		t.Errorf("fenced Replace with the superseded ETag = %v; want a *ConflictError with the current version", err)
	}
	if _, err := s.Backend().Write(ctx, "sup", driver.Write{Data: []byte(`{}`), Cond: driver.IfMatch(d.ETag)}); !errors.Is(err, etagstore.ErrConflict) {
		t.Errorf("the backend's Write with a superseded ETag = %v; want ErrConflict", err)
	}
	if err := s.Backend().Delete(ctx, "sup", d.ETag); !errors.Is(err, etagstore.ErrConflict) {
		t.Errorf("the backend's Delete with a superseded ETag = %v; want ErrConflict", err)
	}
	if after, err := s.Get(ctx, "sup"); err != nil || after.ETag != cur.ETag {
		t.Errorf("after the refused writes: %+v, %v; want the version %s unchanged", after, err, cur.ETag)
	}
}
