package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Batches of transactions: a member that writes nothing is checked by its
// own reads, as on its own, and never gets an unknown outcome.

// lossy is heldCommits whose next commit holding a delete lands and then
// loses its answer (a transport error, as FaultyBackend's drop).
type lossy struct {
	*heldCommits
	lose atomic.Bool
}

func (l *lossy) Abilities() driver.Abilities {
	a := l.heldCommits.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		etags, err := commit(ctx, actions)
		for _, ac := range actions {
			if ac.Delete && err == nil && l.lose.CompareAndSwap(true, false) {
				return nil, errors.New("connection reset after the commit landed")
			}
		}
		return etags, err
	}
	return a
}

// A read-only member of a batch whose commit's answer is lost and cannot
// be resolved does not get *OutcomeUnknownError: it wrote nothing (on its
// own it sends no commit at all).
func TestTxBatchReadOnlyMemberOfUnknownBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lossy{heldCommits: newHeldCommits()}
		s := etagstore.New[counter](l, nil)
		ctx := t.Context()
		for _, k := range []string{"gone", "kept"} {
			if _, err := s.Create(ctx, k, counter{1}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		l.lose.Store(true)
		var delErr, readErr error
		wg.Go(func() {
			_, delErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Delete("gone") })
		})
		synctest.Wait()
		wg.Go(func() {
			_, readErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				_, err := tx.Get("kept")
				return err
			})
		})
		synctest.Wait()
		close(l.hold)
		wg.Wait()
		t.Logf("deleter: %v", delErr)
		if errors.Is(readErr, etagstore.ErrOutcomeUnknown) {
			t.Errorf("read-only member = %v; it wrote nothing", readErr)
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

// A read-only transaction over two partitions commits nothing: it
// succeeds through the Store's queue (group commit) as on its own.
func TestTxBatchReadOnlyAcrossPartitions(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			p := tableLike{partitioned{newHeldCommitsOpen()}}
			s := etagstore.New[counter](p, &etagstore.Options{DisableGroupCommit: !grouped})
			ctx := t.Context()
			for _, k := range []string{"p1/a", "p2/b"} {
				if _, err := s.Create(ctx, k, counter{1}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				_, err1 := tx.Get("p1/a")
				_, err2 := tx.Get("p2/b")
				return errors.Join(err1, err2)
			})
			t.Logf("grouped=%v: %v", grouped, err)
			if err != nil {
				t.Errorf("read-only transaction over two partitions, grouped=%v: %v", grouped, err)
			}
		})
	}
}

// tableLike is partitioned without pure checks, as tables: a check is a
// write (Merge Entity), so a transaction that writes nothing revalidates
// by reading.
type tableLike struct{ partitioned }

func (p tableLike) Abilities() driver.Abilities {
	a := p.partitioned.Abilities()
	a.PureChecks = false
	return a
}

// absentUnchecked is memstore as tables commit: no pure checks, and a
// check that a key is absent is left out of the commit (tablestore's
// commit, commit.go: "it is left out").
type absentUnchecked struct{ *heldCommits }

func (a absentUnchecked) Abilities() driver.Abilities {
	ab := a.heldCommits.Abilities()
	ab.PureChecks = false
	commit := ab.Commit
	ab.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		var kept []driver.Action
		var idx []int
		for i, ac := range actions {
			if ac.Check && ac.Write.Cond.Kind == driver.CondCreate {
				continue
			}
			kept, idx = append(kept, ac), append(idx, i)
		}
		etags := make([]driver.ETag, len(actions))
		if len(kept) == 0 {
			return etags, nil
		}
		got, err := commit(ctx, kept)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			etags[i] = got[j]
		}
		return etags, nil
	}
	return ab
}

// On a backend that cannot check an absent key (tables), a read-only
// transaction is checked by reading its keys again, in a batch as on its
// own: it never returns on a view that was never current (x missing and k
// at the version written after x was created).
func TestTxBatchReadOnlyMemberTornAbsence(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := absentUnchecked{newHeldCommits()}
				s := etagstore.New[counter](h, &etagstore.Options{DisableGroupCommit: !grouped, CacheSize: -1})
				other := etagstore.New[counter](h, &etagstore.Options{DisableGroupCommit: true})
				ctx := t.Context()
				if _, err := s.Create(ctx, "k", counter{0}); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				if grouped {
					holding(t, s, &wg)
					wg.Go(func() { // a writer first in the batch: the batch sends a commit
						if _, err := s.Transact(ctx, increment("j")); err != nil {
							t.Errorf("writer: %v", err)
						}
					})
					synctest.Wait()
				}
				var sawMissing bool
				var sawK int
				first := true
				wg.Go(func() {
					_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
						_, err := tx.Get("x")
						sawMissing = errors.Is(err, etagstore.ErrNotFound)
						if first {
							first = false
							// Another writer creates x, then moves k on.
							if _, err := other.Create(ctx, "x", counter{1}); err != nil {
								return err
							}
							if _, err := other.Update(ctx, "k", func(c *counter) error { c.N = 1; return nil }); err != nil {
								return err
							}
						}
						c, err := tx.Get("k")
						sawK = c.N
						return err
					})
					if err != nil {
						t.Errorf("reader: %v", err)
					}
				})
				synctest.Wait()
				close(h.hold)
				wg.Wait()
				t.Logf("grouped=%v: x missing %v, k.N %d", grouped, sawMissing, sawK)
				if sawMissing && sawK == 1 {
					t.Errorf("grouped=%v: the reader returned on x missing and k.N == 1, never current together (x was created before k moved to 1)", grouped)
				}
			})
		})
	}
}
