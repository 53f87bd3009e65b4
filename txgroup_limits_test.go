package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Batches of transactions at a backend's limits: partitions, 100 actions
// per commit, a member that reads many keys.

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

// A member that reads 150 keys, behind one that wrote some of them.
func TestTxBatchManyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		keys := make([]string, 150)
		for i := range keys {
			keys[i] = "k" + string(rune('A'+i/26)) + string(rune('a'+i%26))
		}
		sum := func(tx *etagstore.Tx[counter]) error {
			total := 0
			for _, k := range keys {
				c, err := tx.Get(k)
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				total += c.N
			}
			return tx.Put("sum", counter{total})
		}
		writeAll := func(tx *etagstore.Tx[counter]) error {
			for _, k := range keys[:100] {
				if err := increment(k)(tx); err != nil {
					return err
				}
			}
			return nil
		}
		e1, e2 := twoInOneBatch(t, h, s, writeAll, sum)
		if e1 != nil || e2 != nil {
			t.Fatal(e1, e2)
		}
		if d, _ := s.Get(t.Context(), "sum"); d.Value.N != 100 {
			t.Errorf("sum %d, want 100", d.Value.N)
		}
	})
}

// checkCounted is partitioned memstore whose CheckCommit calls are
// counted.
type checkCounted struct {
	partitioned
	checks *int64
	mu     *sync.Mutex
}

func (c checkCounted) Abilities() driver.Abilities {
	a := c.partitioned.Abilities()
	chk := a.CheckCommit
	a.CheckCommit = func(actions []driver.Action) error {
		c.mu.Lock()
		*c.checks++
		c.mu.Unlock()
		return chk(actions)
	}
	return a
}

// A batch whose keys fit is checked once (CheckCommit), not once per
// member; one that does not fit is checked a member at a time, and each
// member still commits.
func TestTxBatchChecksOncePerRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   []string
		checks int64
	}{
		{"fits", []string{"p1/a", "p1/b", "p1/c", "p1/d"}, 2},       // the holder's request, and the batch's
		{"partitions", []string{"p1/a", "p2/b", "p1/c", "p2/d"}, 8}, // the holder's; the batch whole, a search for the first misfit (3), the members after it one by one (2); the next batch, of p2's, whole
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var checks int64
				c := checkCounted{partitioned{newHeldCommits()}, &checks, &sync.Mutex{}}
				s := etagstore.New[counter](c, nil)
				var wg sync.WaitGroup
				wg.Go(func() {
					if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error { return tx.Upsert("hold", counter{1}) }); err != nil {
						t.Errorf("hold: %v", err)
					}
				})
				synctest.Wait()
				for _, k := range tc.keys {
					wg.Go(func() {
						if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
							return errors.Join(tx.Upsert(k, counter{1}), tx.Upsert(k+"2", counter{1}))
						}); err != nil {
							t.Errorf("%s: %v", k, err)
						}
					})
					synctest.Wait()
				}
				close(c.hold)
				wg.Wait()
				if checks != tc.checks {
					t.Errorf("CheckCommit called %d times, want %d", checks, tc.checks)
				}
				for _, k := range tc.keys {
					if d, err := s.Get(t.Context(), k); err != nil || d.Value.N != 1 {
						t.Errorf("%s: %+v, %v", k, d.Value, err)
					}
				}
			})
		})
	}
}
