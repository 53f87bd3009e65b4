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
				return nil, errors.New("round3: connection reset after the commit landed")
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

func readOnly(k string) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error { _, err := tx.Get(k); return err }
}

// B's blind Upsert writes T alone on its own, and after A's transaction
// serially; in one batch behind A, which read k (or read and wrote it),
// it does too: "x", a member T does not know, goes.
func TestTxBatchUpsertAfterEarlierMemberRead(t *testing.T) {
	for name, first := range map[string]func(tx *etagstore.Tx[counter]) error{"read": readOnly("k"), "increment": increment("k")} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Serially: T alone.
				h := newHeldCommitsOpen()
				seedUnknown(t, h, "k")
				s := etagstore.New[counter](h, nil)
				if _, err := s.Transact(t.Context(), first); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Transact(t.Context(), upsert("k", 9)); err != nil {
					t.Fatal(err)
				}
				serial := storedRaw(t, h, "k")
				// In one batch.
				h = newHeldCommits()
				seedUnknown(t, h, "k")
				s = etagstore.New[counter](h, nil)
				e1, e2 := twoInOneBatch(t, h, s, first, upsert("k", 9))
				if e1 != nil || e2 != nil {
					t.Fatal(e1, e2)
				}
				batched := storedRaw(t, h, "k")
				t.Logf("serial %s, batched %s", serial, batched)
				if batched != serial {
					t.Errorf("Upsert behind a %s of k: batched %s, serially %s", name, batched, serial)
				}
			})
		})
	}
}

// MaxAttempts 1. A's transaction is one blind Upsert, which cannot lose a
// race on its own; behind it in the batch, B's read goes stale before the
// commit, and the batch's one attempt is refused: A, whose keys did not
// lose, runs again on its own and commits.
func TestTxBatchBlindMemberFailsForBatchMatesConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1}})
		other := etagstore.New[counter](h, &etagstore.Options{DisableGroupCommit: true})
		ctx := t.Context()
		if _, err := s.Create(ctx, "b", counter{}); err != nil {
			t.Fatal(err)
		}
		first := true
		e1, e2 := twoInOneBatch(t, h, s, upsert("a", 1), func(tx *etagstore.Tx[counter]) error {
			if err := increment("b")(tx); err != nil {
				return err
			}
			if first {
				first = false
				_, err := other.Update(ctx, "b", func(c *counter) error { c.N += 10; return nil })
				return err
			}
			return nil
		})
		t.Logf("A (blind upsert): %v; B: %v", e1, e2)
		if e1 != nil {
			t.Errorf("A's blind Upsert = %v; alone it cannot conflict", e1)
		}
	})
}
