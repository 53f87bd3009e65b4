package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Batches of transactions under attack (an adversarial review's cases,
// kept): each states what must hold.

// A member that read an earlier member's write, not stored yet, and then
// overwrote it, does not return an error made on that value.
func TestTxBatchErrorOnOverwrittenInheritedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		if _, err := s.Upsert(ctx, "x", counter{1}); err != nil { // the Store caches x=1
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				x, err := tx.Get("x")
				if err != nil {
					return err
				}
				return tx.Put("n", x) // n takes x's value
			})
			if err != nil {
				t.Errorf("the first member: %v", err)
			}
		})
		synctest.Wait()
		var bErr error
		var bRuns atomic.Int64
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				bRuns.Add(1)
				n, err := tx.Get("n")
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				seen := n.N
				if err := tx.Put("n", counter{100}); err != nil {
					return err
				}
				if seen == 1 {
					return errSawUncommitted
				}
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x during C's turn, after B's
			var once sync.Once
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				var err error
				once.Do(func() {
					_, err = h.Backend.Write(ctx, "x", driver.Write{Data: []byte(`{"N":5}`), Cond: driver.Cond{Kind: driver.CondNone}})
				})
				return err
			})
			if err != nil {
				t.Errorf("C: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if errors.Is(bErr, errSawUncommitted) {
			n, _ := s.Get(ctx, "n")
			t.Errorf("second member returned %v after %d run(s); n=1 was never stored (n is now %d)", bErr, bRuns.Load(), n.Value.N)
		}
	})
}

// The same with a Delete cancelling an earlier member's create.
func TestTxBatchErrorOnCancelledInheritedCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		if _, err := s.Upsert(ctx, "x", counter{1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				x, err := tx.Get("x")
				if err != nil {
					return err
				}
				if x.N == 1 {
					return tx.Put("n", x) // creates n only on the stale x
				}
				return nil
			})
			if err != nil {
				t.Errorf("the first member: %v", err)
			}
		})
		synctest.Wait()
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("n"); err != nil {
					return nil // nothing to see
				}
				if err := tx.Delete("n"); err != nil {
					return err
				}
				return errSawUncommitted
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x during C's turn, after B's
			var once sync.Once
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				var err error
				once.Do(func() {
					_, err = h.Backend.Write(ctx, "x", driver.Write{Data: []byte(`{"N":5}`), Cond: driver.Cond{Kind: driver.CondNone}})
				})
				return err
			})
			if err != nil {
				t.Errorf("C: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if errors.Is(bErr, errSawUncommitted) {
			_, err := s.Get(ctx, "n")
			t.Errorf("second member returned %v; n never existed (Get n: %v)", bErr, err)
		}
	})
}

// The same with a panic.
func TestTxBatchPanicOnOverwrittenInheritedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		if _, err := s.Upsert(ctx, "x", counter{1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				x, err := tx.Get("x")
				if err != nil {
					return err
				}
				return tx.Put("n", x)
			})
			if err != nil {
				t.Errorf("the first member: %v", err)
			}
		})
		synctest.Wait()
		var recovered any
		wg.Go(func() {
			defer func() { recovered = recover() }()
			_, _ = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				n, _ := tx.Get("n")
				if err := tx.Put("n", counter{100}); err != nil {
					return err
				}
				if n.N == 1 {
					panic("saw n=1")
				}
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x during C's turn, after B's
			var once sync.Once
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				var err error
				once.Do(func() {
					_, err = h.Backend.Write(ctx, "x", driver.Write{Data: []byte(`{"N":5}`), Cond: driver.Cond{Kind: driver.CondNone}})
				})
				return err
			})
			if err != nil {
				t.Errorf("C: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if recovered != nil {
			n, _ := s.Get(ctx, "n")
			t.Errorf("second member panicked %v on n=1, never stored (n is now %d)", recovered, n.Value.N)
		}
	})
}

// The Tx kept after Store.Transact: ETag reports the new ETag, Put fails.
func TestTxBatchKeptTxAfterCommit(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[counter](newHeldCommits().Backend, nil)
	var kept *etagstore.Tx[counter]
	docs, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		kept = tx
		return tx.Put("k", counter{1})
	})
	if err != nil || len(docs) != 1 {
		t.Fatal(docs, err)
	}
	if got, err := kept.ETag("k"); got != docs[0].ETag {
		t.Errorf("after the commit tx.ETag(k) = %q, %v; the commit made %q", got, err, docs[0].ETag)
	}
	if err := kept.Put("k", counter{2}); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("Put after the commit = %v, want ErrInvalidInput", err)
	}
}

// partitioned is memstore whose commits cannot mix key prefixes (the part
// before '/'), as table partitions.
type partitioned struct {
	*heldCommits
}

func prefix(k string) string {
	for i := range len(k) {
		if k[i] == '/' {
			return k[:i]
		}
	}
	return ""
}

func (p partitioned) Abilities() driver.Abilities {
	a := p.heldCommits.Abilities()
	chk := func(actions []driver.Action) error {
		for _, ac := range actions[1:] {
			if prefix(ac.Key) != prefix(actions[0].Key) {
				return etagstore.ErrInvalidInput
			}
		}
		return nil
	}
	commit := a.Commit
	a.CheckCommit = chk
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		if err := chk(actions); err != nil {
			return nil, err
		}
		return commit(ctx, actions)
	}
	return a
}

// MaxAttempts 1: a transaction across partitions fails before anything
// is sent, after one run of fn.
func TestTxBatchMaxAttemptsMisfit(t *testing.T) {
	p := partitioned{newHeldCommits()}
	s := etagstore.New[counter](p, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
	runs := 0
	_, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
		runs++
		return errors.Join(tx.Put("p1/a", counter{1}), tx.Put("p2/b", counter{1}))
	})
	if !errors.Is(err, etagstore.ErrInvalidInput) || runs != 1 {
		t.Errorf("Transact = %v after %d runs of fn; want ErrInvalidInput after 1 (MaxAttempts 1)", err, runs)
	}
}

// MaxAttempts 1: a member erring on an earlier member's write runs once.
func TestTxBatchMaxAttemptsInherited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("n")); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var runs atomic.Int64
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				runs.Add(1)
				if _, err := tx.Get("n"); err == nil {
					return errSawUncommitted
				}
				return nil
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if runs.Load() > 1 {
			t.Errorf("B's fn ran %d times with MaxAttempts 1 (Transact = %v)", runs.Load(), bErr)
		}
	})
}

// MaxAttempts 2: a batch attempt lost, then the member leaves for its
// own run: fn runs twice in all.
func TestTxBatchMaxAttemptsBatchRetryThenAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 2}})
		ctx := t.Context()
		if _, err := s.Upsert(ctx, "x", counter{1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				x, err := tx.Get("x")
				if err != nil {
					return err
				}
				return tx.Put("n", x)
			})
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var runs atomic.Int64
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				if runs.Add(1) == 2 {
					return errors.New("only on the second run")
				}
				return tx.Put("b", counter{1})
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: another process changes x once, during the batch's first attempt
			var once sync.Once
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				var err error
				once.Do(func() {
					_, err = h.Backend.Write(ctx, "x", driver.Write{Data: []byte(`{"N":5}`), Cond: driver.Cond{Kind: driver.CondNone}})
				})
				return err
			})
			if err != nil {
				t.Errorf("C: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if runs.Load() > 2 {
			t.Errorf("B's fn ran %d times with MaxAttempts 2 (Transact = %v)", runs.Load(), bErr)
		}
	})
}

// gatedReads is heldCommits whose reads of "gate" wait for gate.
type gatedReads struct {
	*heldCommits
	gate    chan struct{}
	reading chan struct{}
}

func (g gatedReads) Read(ctx context.Context, key string) (driver.Item, error) {
	if key == "gate" {
		select {
		case g.reading <- struct{}{}:
		default:
		}
		<-g.gate
	}
	return g.heldCommits.Read(ctx, key)
}

// A member adopted and then gone (ctx) before the commit is sent: nothing
// of it is written, and the batch runs the others' fns again (uncounted,
// as documented), each committing once.
func TestTxBatchLeaverRerunsOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := gatedReads{heldCommits: newHeldCommits(), gate: make(chan struct{}), reading: make(chan struct{}, 1)}
		s := etagstore.New[counter](g, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var aRuns atomic.Int64
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				aRuns.Add(1)
				return increment("a")(tx)
			}); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		bctx, cancel := context.WithCancel(ctx)
		bDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(bctx, increment("b"))
			bDone <- err
		})
		synctest.Wait()
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("gate"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				return increment("d")(tx)
			}); err != nil {
				t.Errorf("D: %v", err)
			}
		})
		synctest.Wait()
		close(g.hold)
		<-g.reading // D's turn: B's fork was adopted
		cancel()
		if err := <-bDone; !errors.Is(err, context.Canceled) {
			t.Errorf("B = %v, want context.Canceled", err)
		}
		close(g.gate)
		wg.Wait()
		if _, err := s.Get(ctx, "b"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("b: %v; B left with ctx.Err(), want nothing written", err)
		}
		if a, err := s.Get(ctx, "a"); err != nil || a.Value.N != 1 || aRuns.Load() > 2 {
			t.Errorf("a = %+v, %v after %d runs of A's fn; want 1, after at most 2", a.Value, err, aRuns.Load())
		}
	})
}

// Docs come in the order fn first touched their keys; a Get of a key
// an earlier member wrote is a touch.
func TestTxBatchDocsOrderInheritedGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("x")); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var docs []etagstore.Doc[counter]
		wg.Go(func() {
			var err error
			docs, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				x, err := tx.Get("x") // first touch: x
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				if err := tx.Put("y", counter{1}); err != nil {
					return err
				}
				x.N += 10
				return tx.Put("x", x)
			})
			if err != nil {
				t.Errorf("B: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		var keys []string
		for _, d := range docs {
			keys = append(keys, d.Key)
		}
		if len(keys) != 2 || keys[0] != "x" {
			t.Errorf("B's docs in key order %v; fn touched x first, then y", keys)
		}
	})
}

// The Tx of a batch member other than the last, kept after the
// commit: ETag reports the new ETag, Put fails.
func TestTxBatchKeptTxOfEarlierMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var kept *etagstore.Tx[counter]
		var docs []etagstore.Doc[counter]
		wg.Go(func() {
			var err error
			docs, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				kept = tx
				return tx.Put("k", counter{1})
			})
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("other")); err != nil {
				t.Errorf("B: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if got, err := kept.ETag("k"); len(docs) != 1 || got != docs[0].ETag {
			t.Errorf("after the commit tx.ETag(k) = %q, %v; the commit made %v", got, err, docs)
		}
		if err := kept.Put("k", counter{2}); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Put after the commit = %v, want ErrInvalidInput", err)
		}
	})
}

var errInsufficient = errors.New("insufficient")

// Stress: transfers, audits, panics, creates/deletes, under -race.
func TestTxBatchStressConservation(t *testing.T) {
	ctx := t.Context()
	h := newHeldCommits()
	close(h.hold)
	s := etagstore.New[counter](h, nil)
	const accounts, total = 6, 600
	keys := make([]string, accounts)
	for i := range accounts {
		keys[i] = string(rune('a' + i))
		if _, err := s.Create(ctx, keys[i], counter{total / accounts}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var commits, audits, panics, insufficient atomic.Int64
	for g := range 12 {
		wg.Go(func() {
			for i := range 60 {
				from, to := keys[(g+i)%accounts], keys[(g*7+i*3+1)%accounts]
				if from == to {
					to = keys[(g+i+1)%accounts]
				}
				amt := (g*i)%40 + 1
				switch i % 5 {
				case 0: // audit
					_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
						sum := 0
						for _, k := range keys {
							c, err := tx.Get(k)
							if err != nil {
								return err
							}
							sum += c.N
						}
						if sum != total {
							return errInvariant
						}
						return nil
					})
					if err != nil {
						t.Errorf("audit: %v", err)
					}
					audits.Add(1)
				case 1: // panic when poor
					func() {
						defer func() {
							if recover() != nil {
								panics.Add(1)
							}
						}()
						if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
							f, err := tx.Get(from)
							if err != nil {
								return err
							}
							if f.N < 50 {
								panic("poor")
							}
							tc, err := tx.Get(to)
							if err != nil {
								return err
							}
							f.N, tc.N = f.N-amt, tc.N+amt
							return errors.Join(tx.Put(from, f), tx.Put(to, tc))
						}); err != nil {
							t.Errorf("transfer: %v", err)
						}
					}()
				default:
					tmp := from + "-tmp"
					_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
						f, err := tx.Get(from)
						if err != nil {
							return err
						}
						if f.N < amt {
							return errInsufficient
						}
						tc, err := tx.Get(to)
						if err != nil {
							return err
						}
						f.N, tc.N = f.N-amt, tc.N+amt
						if _, err := tx.Get(tmp); err == nil {
							if err := tx.Delete(tmp); err != nil {
								return err
							}
						} else if err := tx.Put(tmp, counter{amt}); err != nil {
							return err
						}
						return errors.Join(tx.Put(from, f), tx.Put(to, tc))
					})
					switch {
					case errors.Is(err, errInsufficient):
						insufficient.Add(1)
					case err != nil:
						t.Errorf("transfer: %v", err)
					default:
						commits.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	sum := 0
	for _, k := range keys {
		c, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		sum += c.Value.N
	}
	if sum != total {
		t.Errorf("sum %d, want %d", sum, total)
	}
	t.Logf("transfers %d, audits %d, panics %d, insufficient %d, backend commits %d", commits.Load(), audits.Load(), panics.Load(), insufficient.Load(), h.commits.Load())
}

// A member whose fn keeps reading while it waits for a transaction queued
// behind it leaves the batch: its reads do not extend its turn forever.
func TestTxBatchReadingWaiterLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		cDone := make(chan struct{})
		polls := 0
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				for i := 0; ; i++ {
					select {
					case <-cDone:
						return increment("a")(tx)
					case <-time.After(time.Millisecond):
					}
					polls++
					if i == 5000 { // 5 s of fake time
						return errors.New("gave up waiting")
					}
					if _, err := tx.Get(fmt.Sprintf("poll-%d", i)); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
						return err
					}
				}
			})
			if err != nil {
				t.Errorf("A: %v (after %d polls)", err, polls)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			defer close(cDone)
			if _, err := s.Transact(ctx, increment("c")); err != nil {
				t.Errorf("C: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
	})
}

// A creates k, B (same batch) deletes it: A still gets its Doc, superseded.
func TestTxBatchCreateThenDeleteDocs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var aDocs []etagstore.Doc[counter]
		wg.Go(func() {
			var err error
			aDocs, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Put("k", counter{1}) })
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Delete("k") }); err != nil {
				t.Errorf("B: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if len(aDocs) != 1 || !aDocs[0].ETag.Superseded() {
			t.Errorf("A's docs = %+v; want k with a Superseded ETag", aDocs)
		}
		if _, err := s.Get(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("k: %v, want not found", err)
		}
	})
}

// twoGates: commits writing "gate2" wait for gate2 too.
type twoGates struct {
	*heldCommits
	gate2 chan struct{}
}

func (g twoGates) Abilities() driver.Abilities {
	a := g.heldCommits.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		for _, ac := range actions {
			if ac.Key == "gate2" && !ac.Check {
				<-g.gate2
			}
		}
		return commit(ctx, actions)
	}
	return a
}

// A read-only member whose ctx ends while the batch's commit is in
// flight wrote nothing: ctx.Err(), not ErrOutcomeUnknown.
func TestTxBatchReadOnlyLeaverNotUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := twoGates{newHeldCommits(), make(chan struct{})}
		s := etagstore.New[counter](g, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				return errors.Join(tx.Put("gate2", counter{1}), tx.Put("w", counter{1}))
			}); err != nil {
				t.Errorf("W: %v", err)
			}
		})
		synctest.Wait()
		rctx, cancel := context.WithCancel(ctx)
		var rErr error
		wg.Go(func() {
			_, rErr = s.Transact(rctx, func(tx *etagstore.Tx[counter]) error {
				_, err := tx.Get("w")
				if errors.Is(err, etagstore.ErrNotFound) {
					return nil
				}
				return err
			})
		})
		synctest.Wait()
		close(g.hold)
		synctest.Wait() // the batch's commit waits for gate2
		cancel()
		synctest.Wait()
		close(g.gate2)
		wg.Wait()
		if errors.Is(rErr, etagstore.ErrOutcomeUnknown) {
			t.Errorf("read-only R = %v; it wrote nothing", rErr)
		}
	})
}

// Members in different partitions: each commits, in its own batch.
func TestTxBatchPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := partitioned{newHeldCommits()}
		s := etagstore.New[counter](p, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Upsert("hold", counter{1}) }); err != nil {
				t.Errorf("hold: %v", err)
			}
		})
		synctest.Wait()
		for _, k := range []string{"p1/a", "p2/b", "p1/c", "p3/d", "p2/e", "p1/f"} {
			wg.Go(func() {
				docs, err := s.Transact(ctx, increment(k))
				if err != nil || len(docs) != 1 {
					t.Errorf("%s: %v %v", k, docs, err)
				}
			})
			synctest.Wait()
		}
		wg.Go(func() {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				return errors.Join(tx.Put("p1/x", counter{1}), tx.Put("p2/x", counter{1}))
			})
			if !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("across partitions: %v", err)
			}
		})
		synctest.Wait()
		close(p.hold)
		wg.Wait()
		for _, k := range []string{"p1/a", "p2/b", "p1/c", "p3/d", "p2/e", "p1/f"} {
			if d, err := s.Get(ctx, k); err != nil || d.Value.N != 1 {
				t.Errorf("%s = %v %v", k, d, err)
			}
		}
		t.Logf("commits %d", p.commits.Load())
	})
}

// The write-skew conformance case with both transactions on one Store.
func TestTxBatchWriteSkewOneStore(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[counter](newHeldCommits().Backend, nil)
	for _, k := range []string{"skew-a", "skew-b"} {
		if _, err := s.Create(ctx, k, counter{1}); err != nil {
			t.Fatal(err)
		}
	}
	clear := func(mine, other string, read chan<- struct{}, wait <-chan struct{}) func(*etagstore.Tx[counter]) error {
		first := true
		return func(tx *etagstore.Tx[counter]) error {
			p, err := tx.Get(mine)
			if err != nil {
				return err
			}
			o, err := tx.Get(other)
			if err != nil {
				return err
			}
			if first {
				first = false
				close(read)
				<-wait
			}
			if o.N == 0 {
				return nil
			}
			p.N = 0
			return tx.Put(mine, p)
		}
	}
	aRead, bRead := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var aErr, bErr error
	wg.Go(func() { _, aErr = s.Transact(ctx, clear("skew-a", "skew-b", aRead, bRead)) })
	wg.Go(func() { _, bErr = s.Transact(ctx, clear("skew-b", "skew-a", bRead, aRead)) })
	wg.Wait()
	if aErr != nil || bErr != nil {
		t.Fatalf("Transact: %v, %v", aErr, bErr)
	}
	a, _ := s.Get(ctx, "skew-a")
	b, _ := s.Get(ctx, "skew-b")
	if a.Value.N+b.Value.N != 1 {
		t.Errorf("A=%d B=%d", a.Value.N, b.Value.N)
	}
}

// Stress with slow fns (timeouts), nested Transacts, leavers, under -race.
func TestTxBatchStressSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := etagstore.New[counter](newHeldCommits().Backend, nil)
		const accounts, total = 5, 500
		keys := make([]string, accounts)
		for i := range accounts {
			keys[i] = fmt.Sprintf("acct-%d", i)
			if _, err := s.Create(ctx, keys[i], counter{total / accounts}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var unknown, canceled atomic.Int64
		for g := range 10 {
			wg.Go(func() {
				for i := range 30 {
					from, to := keys[(g+i)%accounts], keys[(g+2*i+1)%accounts]
					if from == to {
						continue
					}
					cctx, cancel := context.WithCancel(ctx)
					if i%4 == 3 {
						time.AfterFunc(time.Duration((g*i)%7)*time.Millisecond, cancel)
					}
					_, err := s.Transact(cctx, func(tx *etagstore.Tx[counter]) error {
						f, err := tx.Get(from)
						if err != nil {
							return err
						}
						switch (g + i) % 6 {
						case 0:
							time.Sleep(15 * time.Millisecond) // a slow fn on the bubble's fake clock: its turn times out
						case 1:
							if _, err := s.Transact(ctx, increment("nested")); err != nil {
								return err
							}
						}
						tc, err := tx.Get(to)
						if err != nil {
							return err
						}
						f.N, tc.N = f.N-1, tc.N+1
						return errors.Join(tx.Put(from, f), tx.Put(to, tc))
					})
					cancel()
					switch {
					case errors.Is(err, etagstore.ErrOutcomeUnknown):
						unknown.Add(1)
					case errors.Is(err, context.Canceled):
						canceled.Add(1)
					case err != nil:
						t.Errorf("transfer: %v", err)
					}
				}
			})
		}
		wg.Wait()
		sum := 0
		for _, k := range keys {
			c, err := s.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			sum += c.Value.N
		}
		if sum != total {
			t.Errorf("sum %d, want %d", sum, total)
		}
		t.Logf("unknown %d canceled %d", unknown.Load(), canceled.Load())
	})
}

type limited struct{ *heldCommits }

func (l limited) Abilities() driver.Abilities {
	a := l.heldCommits.Abilities()
	chk := func(actions []driver.Action) error {
		if len(actions) > 100 {
			return fmt.Errorf("%w: %d actions", etagstore.ErrInvalidInput, len(actions))
		}
		return nil
	}
	commit := a.Commit
	a.CheckCommit = chk
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		if err := chk(actions); err != nil {
			return nil, err
		}
		return commit(ctx, actions)
	}
	return a
}

// Batches over 100 keys on a backend that commits at most 100.
func TestTxBatchOver100(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := limited{newHeldCommits()}
		s := etagstore.New[counter](l, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Upsert("hold", counter{1}) }); err != nil {
				t.Errorf("hold: %v", err)
			}
		})
		synctest.Wait()
		for m := range 6 {
			wg.Go(func() {
				docs, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
					for k := range 30 {
						if err := increment(fmt.Sprintf("m%d-%d", m, k))(tx); err != nil {
							return err
						}
					}
					return increment("shared")(tx)
				})
				if err != nil || len(docs) != 31 {
					t.Errorf("member %d: %d docs, %v", m, len(docs), err)
				}
			})
			synctest.Wait()
		}
		close(l.hold)
		wg.Wait()
		if d, err := s.Get(ctx, "shared"); err != nil || d.Value.N != 6 {
			t.Errorf("shared = %v %v", d, err)
		}
		t.Logf("commits %d", l.commits.Load())
	})
}

// B does not return an error made on A's write, which never commits (A's
// caller leaves before the commit).
func TestTxBatchErrorOnWriteThatNeverCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		actx, cancelA := context.WithCancel(ctx)
		aDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(actx, func(tx *etagstore.Tx[counter]) error { return tx.Put("n", counter{1}) })
			aDone <- err
		})
		synctest.Wait()
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				n, _ := tx.Get("n") // A's write
				if err := tx.Put("n", counter{n.N + 100}); err != nil {
					return err
				}
				if n.N == 1 {
					return errSawUncommitted
				}
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() { // C: during its turn, A's caller gives up
			var once sync.Once
			_, _ = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				once.Do(func() {
					cancelA()
					if err := <-aDone; !errors.Is(err, context.Canceled) {
						t.Errorf("A = %v", err)
					}
				})
				return nil
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		_, err := s.Get(ctx, "n")
		if errors.Is(bErr, errSawUncommitted) {
			t.Errorf("B = %v; A's write n=1 never committed (Get n: %v)", bErr, err)
		}
	})
}

var errStaleVersion = errors.New("the caller's version is stale")

// tx.ETag of a key an earlier member of the batch wrote matches no version
// held: a check of a caller's version fails, and no update is lost.
func TestTxBatchETagOfInheritedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		d0, err := s.Create(ctx, "k", counter{1})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("k")); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				et, err := tx.ETag("k")
				if err != nil {
					return err
				}
				if et != d0.ETag {
					return errStaleVersion
				}
				return tx.Put("k", counter{100}) // the caller's edit of d0
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		k, _ := s.Get(ctx, "k")
		switch {
		case bErr == nil && k.Value.N != 101: // B (on its own) went first, then A
			t.Errorf("B's check of version %q passed, and k = %d: want 101 (B's 100, then A's increment)", d0.ETag, k.Value.N)
		case bErr != nil && (!errors.Is(bErr, errStaleVersion) || k.Value.N != 2):
			t.Errorf("B = %v, k = %d: want errStaleVersion and A's increment alone (2)", bErr, k.Value.N)
		}
	})
}

// Two compare-and-swaps on one version (as docstore's atomic writes with
// revisions): one succeeds.
func TestTxBatchTwoCASOnOneVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		d0, err := s.Create(ctx, "k", counter{1})
		if err != nil {
			t.Fatal(err)
		}
		cas := func(v int) func(tx *etagstore.Tx[counter]) error {
			return func(tx *etagstore.Tx[counter]) error {
				et, err := tx.ETag("k")
				if err != nil {
					return err
				}
				if et != d0.ETag {
					return errStaleVersion
				}
				return tx.Put("k", counter{v})
			}
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var errs [2]error
		for i := range 2 {
			wg.Go(func() { _, errs[i] = s.Transact(ctx, cas(10+i)) })
			synctest.Wait()
		}
		close(h.hold)
		wg.Wait()
		if errs[0] == nil && errs[1] == nil {
			k, _ := s.Get(ctx, "k")
			t.Errorf("both swaps of version %s succeeded; k = %d", d0.ETag, k.Value.N)
		}
	})
}
