package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// A mutate that writes its own key: the nested write lands once, and the
// Update fails at once with one error matching ErrInvalidInput alone,
// naming the mistake, instead of retrying (and writing again) until its
// policy ends. Every case is bounded at a second.

type nestDoc struct{ N int64 }

// selfWriteConfigs are the Store configurations every case runs on.
var selfWriteConfigs = []struct {
	name string
	opts etagstore.Options
}{
	{"GroupCommit", etagstore.Options{}},
	{"DisableGroupCommit", etagstore.Options{DisableGroupCommit: true}},
	{"NoCache", etagstore.Options{CacheSize: -1}},
	{"NoCacheNoGroup", etagstore.Options{CacheSize: -1, DisableGroupCommit: true}},
	{"Cache64", etagstore.Options{CacheSize: 64}},
}

// nestedWrite is a write of "k" made from inside the mutate of an Update
// of "k", and what "k" holds once it landed (-1: deleted).
type nestedWrite struct {
	name    string
	missing bool // "k" does not exist: the outer Update creates it (CreateIfMissing)
	grouped bool // a transaction: the batch test's innocent first caller has none to share
	by      string
	write   func(ctx context.Context, s *etagstore.Store[nestDoc]) error
	want    int64
}

var nestedWrites = []nestedWrite{
	{name: "Update", by: "Update", want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		_, err := s.Update(ctx, "k", func(d *nestDoc) error { d.N += 10; return nil })
		return err
	}},
	{name: "Replace", by: "Replace", want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		d, err := s.Get(ctx, "k")
		if err != nil {
			return err
		}
		d.Value.N += 10
		_, err = s.Replace(ctx, d)
		return err
	}},
	{name: "ReplaceAny", by: "Replace", want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		_, err := s.Replace(ctx, etagstore.Doc[nestDoc]{Key: "k", Value: nestDoc{N: 10}, ETag: etagstore.ETagAny})
		return err
	}},
	{name: "Upsert", by: "Upsert", want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		_, err := s.Upsert(ctx, "k", nestDoc{N: 10})
		return err
	}},
	{name: "Delete", by: "Delete", want: -1, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		return s.Delete(ctx, "k", etagstore.ETagAny)
	}},
	{name: "Save", by: "Save", want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		d, err := s.Get(ctx, "k")
		if err != nil {
			return err
		}
		_, err = s.Save(ctx, d, nestDoc{N: d.Value.N + 10}, nil)
		return err
	}},
	{name: "Create", by: "Create", missing: true, want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		_, err := s.Create(ctx, "k", nestDoc{N: 10})
		return err
	}},
	{name: "UpdateCreateIfMissing", by: "Update", missing: true, want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		_, err := s.Update(ctx, "k", func(d *nestDoc) error { d.N += 10; return nil }, etagstore.CreateIfMissing())
		return err
	}},
	{name: "Transact", by: "Transact", grouped: true, want: 10, write: func(ctx context.Context, s *etagstore.Store[nestDoc]) error {
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[nestDoc]) error {
			d, err := tx.Get("k")
			if err != nil {
				return err
			}
			d.N += 10
			return tx.Put("k", d)
		})
		return err
	}},
}

// nestCtx is the context the nested write is given, from the outer's.
var nestCtxs = []struct {
	name string
	ctx  func(outer context.Context) (context.Context, context.CancelFunc)
}{
	{"SameCtx", func(outer context.Context) (context.Context, context.CancelFunc) { return outer, func() {} }},
	{"ChildCtx", func(outer context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(outer, time.Minute)
	}},
	{"Background", func(context.Context) (context.Context, context.CancelFunc) {
		return context.WithCancel(context.Background())
	}},
}

func TestSelfWriteFailsFast(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			for _, w := range nestedWrites {
				t.Run(w.name, func(t *testing.T) {
					for _, c := range nestCtxs {
						t.Run(c.name, func(t *testing.T) {
							opts := cfg.opts
							s := etagstore.New[nestDoc](memstore.New(nil), &opts)
							selfWrite(t, s, w, c.ctx)
						})
					}
				})
			}
		})
	}
}

// selfWrite runs an Update of "k" whose mutate makes the nested write w
// of "k" every time it runs, and checks the outcome.
func selfWrite(t *testing.T, s *etagstore.Store[nestDoc], w nestedWrite, nestCtx func(context.Context) (context.Context, context.CancelFunc)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var opts []etagstore.UpdateOption
	if w.missing {
		opts = append(opts, etagstore.CreateIfMissing())
	} else if _, err := s.Create(ctx, "k", nestDoc{}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	var inner error
	_, err := s.Update(ctx, "k", func(d *nestDoc) error {
		runs++
		nctx, stop := nestCtx(ctx)
		defer stop()
		if inner = w.write(nctx, s); inner != nil {
			return fmt.Errorf("the nested write: %w", inner)
		}
		d.N++
		return nil
	}, opts...)
	wantSelfWrite(t, err, w.by)
	if runs != 1 || inner != nil {
		t.Errorf("mutate ran %d times (the nested write last returned %v); want once, the nested write landing once", runs, inner)
	}
	got, gerr := s.Get(t.Context(), "k")
	switch {
	case w.want < 0 && !errors.Is(gerr, etagstore.ErrNotFound):
		t.Errorf("after a nested Delete, Get = %+v, %v; want ErrNotFound", got, gerr)
	case w.want >= 0 && (gerr != nil || got.Value.N != w.want):
		t.Errorf("stored %+v, %v; want N = %d: the nested write's, once", got.Value, gerr, w.want)
	}
	// The key is usable at once.
	if _, err := s.Update(ctx, "k", func(d *nestDoc) error { d.N++; return nil }, etagstore.CreateIfMissing()); err != nil {
		t.Errorf("an Update after it: %v", err)
	}
}

// wantSelfWrite checks the error of an Update whose mutate wrote its own
// key by a nested by: ErrInvalidInput and no other sentinel, one line,
// naming the mistake, well within the second.
func wantSelfWrite(t *testing.T, err error, by string) {
	t.Helper()
	if err == nil {
		t.Fatal("the Update whose mutate wrote its own key succeeded")
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, etagstore.ErrOutcomeUnknown) {
		t.Fatalf("the Update ran out its second: %v", err)
	}
	if s := driver.SentinelOf(err); s != etagstore.ErrInvalidInput || errors.Is(err, etagstore.ErrConflict) {
		t.Errorf("%v matches %v; want ErrInvalidInput alone", err, s)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "mutate wrote its own key") || !strings.Contains(msg, "nested "+by+" committed") {
		t.Errorf("error %q: want one line naming the mistake and the nested %s", msg, by)
	}
}

// The outer Update in a group-commit batch (it arrives while another
// caller's mutate runs) fails the same way, and the other caller, whose
// version the nested write made stale, is not blamed: it retries and
// succeeds.
func TestSelfWriteInBatch(t *testing.T) {
	for _, w := range nestedWrites {
		if w.missing || w.grouped {
			continue
		}
		t.Run(w.name, func(t *testing.T) {
			s := etagstore.New[nestDoc](memstore.New(nil), nil)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if _, err := s.Create(ctx, "k", nestDoc{}); err != nil {
				t.Fatal(err)
			}
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			var firstErr error
			var wg sync.WaitGroup
			wg.Go(func() { // the first caller: its mutate waits until the outer one is done
				_, firstErr = s.Update(ctx, "k", func(d *nestDoc) error {
					once.Do(func() { close(entered); <-release })
					d.N += 100
					return nil
				})
			})
			<-entered
			runs := 0
			_, err := s.Update(ctx, "k", func(d *nestDoc) error {
				runs++
				if err := w.write(ctx, s); err != nil {
					return err
				}
				d.N++
				return nil
			})
			close(release)
			wg.Wait()
			wantSelfWrite(t, err, w.by)
			if runs != 1 {
				t.Errorf("the outer mutate ran %d times, want once", runs)
			}
			if w.want < 0 { // the nested write deleted the key under the first caller
				if !errors.Is(firstErr, etagstore.ErrNotFound) {
					t.Errorf("the first caller, after a nested Delete: %v, want ErrNotFound", firstErr)
				}
				return
			}
			if firstErr != nil {
				t.Errorf("the first caller, beside the mistake: %v", firstErr)
			}
			if got, err := s.Get(t.Context(), "k"); err != nil || got.Value.N != w.want+100 {
				t.Errorf("stored %+v, %v; want N = %d: the nested write's once, then the first caller's", got.Value, err, w.want+100)
			}
		})
	}
}

// Not a mistake: what does not write the mutate's own key. A nested
// Update that changes nothing, a nested write of another key, and a mutate
// that returns its own error after writing its key (the error comes back
// as it is).
func TestSelfWriteNotMistaken(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			opts := cfg.opts
			s := etagstore.New[nestDoc](memstore.New(nil), &opts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			for _, k := range []string{"k", "other"} {
				if _, err := s.Create(ctx, k, nestDoc{}); err != nil {
					t.Fatal(err)
				}
			}
			d, err := s.Update(ctx, "k", func(d *nestDoc) error {
				if _, err := s.Update(ctx, "k", func(*nestDoc) error { return nil }); err != nil {
					return err
				}
				if _, err := s.Upsert(ctx, "other", nestDoc{N: 7}); err != nil {
					return err
				}
				if _, err := s.Update(ctx, "other", func(o *nestDoc) error { o.N++; return nil }); err != nil {
					return err
				}
				d.N++
				return nil
			})
			if err != nil || d.Value.N != 1 {
				t.Fatalf("Update = %+v, %v; want N = 1", d.Value, err)
			}
			if o, err := s.Get(ctx, "other"); err != nil || o.Value.N != 8 {
				t.Errorf("other = %+v, %v; want 8", o.Value, err)
			}
			mine := errors.New("mine")
			_, err = s.Update(ctx, "k", func(d *nestDoc) error {
				if _, err := s.Upsert(ctx, "k", nestDoc{N: 50}); err != nil {
					return err
				}
				return mine
			})
			if err != mine {
				t.Errorf("a mutate's own error after a nested write: %v, want it as is", err)
			}
		})
	}
}

// Legitimate concurrency is never taken for a nested write: while one
// caller's mutate waits, another goroutine's write of the key (on its
// own, or from inside a mutate of another key) lands; the waiting caller
// loses its race, retries and succeeds.
func TestSelfWriteBesideIsConcurrency(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			for _, fromInside := range []bool{false, true} {
				opts := cfg.opts
				s := etagstore.New[nestDoc](memstore.New(nil), &opts)
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				for _, k := range []string{"k", "a"} {
					if _, err := s.Create(ctx, k, nestDoc{}); err != nil {
						t.Fatal(err)
					}
				}
				entered, wrote := make(chan struct{}), make(chan struct{})
				var once sync.Once
				var wg sync.WaitGroup
				var waiting error
				runs := 0
				wg.Go(func() {
					_, waiting = s.Update(ctx, "k", func(d *nestDoc) error {
						runs++
						once.Do(func() { close(entered); <-wrote })
						d.N++
						return nil
					})
				})
				<-entered
				write := func() error {
					_, err := s.Update(ctx, "k", func(d *nestDoc) error { d.N += 10; return nil })
					return err
				}
				var err error
				if fromInside { // from inside a mutate of another key: still not the waiting caller's
					_, err = s.Update(ctx, "a", func(d *nestDoc) error { d.N++; return write() })
				} else {
					err = write()
				}
				close(wrote)
				wg.Wait()
				if err != nil || waiting != nil {
					t.Fatalf("fromInside=%v: the writer %v, the waiting caller %v; want both to succeed", fromInside, err, waiting)
				}
				if got, _ := s.Get(ctx, "k"); got.Value.N != 11 || runs < 2 {
					t.Errorf("fromInside=%v: N = %d after %d runs of the waiting mutate; want 11 after a retry", fromInside, got.Value.N, runs)
				}
			}
		})
	}
}

// Many goroutines updating one key, some mutates slow, some from inside
// mutates of other keys: every Update succeeds and lands once.
func TestSelfWriteConcurrentUpdates(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			opts := cfg.opts
			s := etagstore.New[nestDoc](memstore.New(nil), &opts)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const writers, each = 8, 30
			var wg sync.WaitGroup
			var failed atomic.Int64
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						inc := func(d *nestDoc) error {
							if i%4 == 0 {
								runtime.Gosched() // a slower mutate: others' writes get in while it runs
							}
							d.N++
							return nil
						}
						var err error
						if w%2 == 0 {
							_, err = s.Update(ctx, "k", inc, etagstore.CreateIfMissing())
						} else {
							own := fmt.Sprintf("own%d", w)
							_, err = s.Update(ctx, own, func(d *nestDoc) error {
								_, err := s.Update(ctx, "k", inc, etagstore.CreateIfMissing())
								return err
							}, etagstore.CreateIfMissing())
						}
						if err != nil {
							failed.Add(1)
							t.Errorf("writer %d: %v", w, err)
							return
						}
					}
				})
			}
			wg.Wait()
			if got, _ := s.Get(ctx, "k"); failed.Load() == 0 && got.Value.N != writers*each {
				t.Errorf("N = %d, want %d", got.Value.N, writers*each)
			}
		})
	}
}
