package etagstore_test

import (
	"errors"
	"fmt"

	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// Tx.Create under contention: one key created by many transactions at
// once, alone and in one batch; Create beside a hot counter read before
// or after it.

// createAndCount is a transaction that creates "k" (holding i), puts
// "side/i" and increments "hot", reading hot before the Create when
// readFirst.
func createAndCount(i int, readFirst bool) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		var c counter
		var err error
		if readFirst {
			if c, err = tx.Get("hot"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
				return err
			}
		}
		if err := tx.Create("k", counter{i}); err != nil {
			return err
		}
		if !readFirst {
			if c, err = tx.Get("hot"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
				return err
			}
		}
		c.N++
		if err := tx.Put(fmt.Sprintf("side/%d", i), counter{i}); err != nil {
			return err
		}
		return tx.Put("hot", c)
	}
}

// checkOneCreator checks that exactly one of n transactions of
// createAndCount won (errs[i] == nil), that every other failed with
// ErrExists alone, and that only the winner's writes are stored.
func checkOneCreator(t *testing.T, s *etagstore.Store[counter], errs []error) {
	t.Helper()
	ctx := t.Context()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Errorf("transactions %d and %d both created k", winner, i)
			}
			winner = i
			continue
		}
		wantOnly(t, fmt.Sprintf("transaction %d", i), err, etagstore.ErrExists)
	}
	if winner < 0 {
		t.Fatalf("no transaction created k")
	}
	if d, err := s.Get(ctx, "k"); err != nil || d.Value.N != winner {
		t.Errorf("k = %+v, %v; want the winner's %d", d.Value, err, winner)
	}
	if d, err := s.Get(ctx, "hot"); err != nil || d.Value.N != 1 {
		t.Errorf("hot = %+v, %v; want 1 (one transaction committed)", d.Value, err)
	}
	for i := range errs {
		_, err := s.Get(ctx, fmt.Sprintf("side/%d", i))
		if i == winner && err != nil {
			t.Errorf("the winner's side write: %v", err)
		}
		if i != winner && !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("side/%d of a refused transaction: %v, want ErrNotFound", i, err)
		}
	}
}

// Many transactions create one key at once, each also writing a key of
// its own and a counter: exactly one commits; every other fails with
// ErrExists alone and writes nothing.
func TestTxCreateManyRacersOneWins(t *testing.T) {
	for _, grouped := range []bool{true, false} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			s := etagstore.New[counter](memstore.New(nil), &etagstore.Options{DisableGroupCommit: !grouped})
			const n = 32
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					_, errs[i] = s.Transact(t.Context(), createAndCount(i, i%2 == 0))
				})
			}
			close(start)
			wg.Wait()
			checkOneCreator(t, s, errs)
		})
	}
}

// The same, with every transaction in one batch (queued behind a held
// commit): the batch's lookup finds "k" missing, the first creator's
// Create is inherited by the others, who must not commit theirs.
func TestTxCreateManyRacersOneBatch(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHeldCommits()
				s := etagstore.New[counter](h, nil)
				if existing {
					if _, err := s.Create(t.Context(), "k", counter{-1}); err != nil {
						t.Fatal(err)
					}
				}
				var wg sync.WaitGroup
				holding(t, s, &wg)
				const n = 8
				errs := make([]error, n)
				for i := range n {
					wg.Go(func() { _, errs[i] = s.Transact(t.Context(), createAndCount(i, i%2 == 0)) })
					synctest.Wait()
				}
				close(h.hold)
				wg.Wait()
				if !existing {
					checkOneCreator(t, s, errs)
					return
				}
				for i, err := range errs {
					wantOnly(t, fmt.Sprintf("transaction %d", i), err, etagstore.ErrExists)
				}
				if d, _ := s.Get(t.Context(), "k"); d.Value.N != -1 {
					t.Errorf("k = %+v, want the existing -1", d.Value)
				}
				if _, err := s.Get(t.Context(), "hot"); !errors.Is(err, etagstore.ErrNotFound) {
					t.Errorf("hot: %v, want nothing written", err)
				}
			})
		})
	}
}

// Package-level Transact over two Store types on one backend: a claim
// (Tx.Create) and a counter of another type, many racers per claim.
func TestTxCreateRacersTwoTypes(t *testing.T) {
	b := memstore.New(nil)
	claims := etagstore.New[probeDoc](b, nil)
	counts := etagstore.New[counter](b, nil)
	const n, names = 40, 5
	var won [names]atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("claim/%d", i%names)
			err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
				c, err := counts.In(tx).Get("count")
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				if err := claims.In(tx).Create(name, probeDoc{Y: fmt.Sprint(i)}); err != nil {
					return err
				}
				c.N++
				return counts.In(tx).Put("count", c)
			})
			switch {
			case err == nil:
				won[i%names].Add(1)
			default:
				wantOnly(t, fmt.Sprintf("claim %d", i), err, etagstore.ErrExists)
			}
		})
	}
	wg.Wait()
	for j := range names {
		if w := won[j].Load(); w != 1 {
			t.Errorf("claim/%d won %d times, want 1", j, w)
		}
	}
	if d, err := counts.Get(t.Context(), "count"); err != nil || d.Value.N != names {
		t.Errorf("count = %+v, %v; want %d", d.Value, err, names)
	}
}

// Creates of fresh keys beside a hot counter, read before or after the
// Create, under contention: every transaction commits once, and the
// counter counts the keys created.
func TestTxCreateBesideHotCounter(t *testing.T) {
	s := etagstore.New[counter](memstore.New(nil), nil)
	const writers, each = 16, 8
	var ok atomic.Int64
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for j := range each {
				key := fmt.Sprintf("item/%d/%d", g, j)
				before := (g+j)%2 == 0
				_, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
					var c counter
					var err error
					if before {
						if c, err = tx.Get("count"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
							return err
						}
					}
					if err := tx.Create(key, counter{1}); err != nil {
						return err
					}
					if !before {
						if c, err = tx.Get("count"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
							return err
						}
					}
					c.N++
					return tx.Put("count", c)
				})
				if err != nil {
					t.Errorf("%s: %v", key, err)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	d, err := s.Get(t.Context(), "count")
	if err != nil || int64(d.Value.N) != ok.Load() || ok.Load() != writers*each {
		t.Errorf("count = %+v, %v; %d transactions committed, want %d", d.Value, err, ok.Load(), writers*each)
	}
	n := 0
	for d, err := range s.List(t.Context(), "item/") {
		if err != nil {
			t.Fatal(err)
		}
		if d.Value.N != 1 {
			t.Errorf("%s = %+v", d.Key, d.Value)
		}
		n++
	}
	if n != writers*each {
		t.Errorf("%d items stored, want %d", n, writers*each)
	}
}

// A Create of a key an earlier member of the batch creates is refused at
// once (the key is known); a fn that ignores that refusal and commits
// other writes must not overwrite the earlier member's document.
func TestTxCreateIgnoredRefusalInBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		e1, e2 := twoInOneBatch(t, h, s,
			func(tx *etagstore.Tx[counter]) error { return tx.Create("k", counter{1}) },
			func(tx *etagstore.Tx[counter]) error {
				if err := tx.Create("k", counter{2}); !errors.Is(err, etagstore.ErrExists) {
					t.Errorf("second Create of k = %v, want ErrExists", err)
				}
				return tx.Put("other", counter{2})
			})
		if e1 != nil || e2 != nil {
			t.Fatalf("Transact = %v, %v", e1, e2)
		}
		if d, _ := s.Get(t.Context(), "k"); d.Value.N != 1 {
			t.Errorf("k = %+v, want the first creator's 1", d.Value)
		}
		if d, _ := s.Get(t.Context(), "other"); d.Value.N != 2 {
			t.Errorf("other = %+v, want 2", d.Value)
		}
	})
}
