package etagstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// Transactions over Stores of different types on one backend, grouped
// together: conservation under contention, Stores with group commit off
// beside grouped ones, and Transact nested in a queued first run.

type acctA struct{ Bal int }
type acctB struct {
	Cents int
	Note  string
}
type receipt struct{ From, To string }

// 64 goroutines move money between accounts of two Store types on one
// memstore (package-level Transact), each move creating a receipt whose
// id two movers share (one is refused with ErrExists), while audits read
// every account: every audit sees the total, receipts match the moves.
func TestTxMixedTypesConservation(t *testing.T) {
	b := memstore.New(nil)
	as := etagstore.New[acctA](b, nil)
	bs := etagstore.New[acctB](b, nil)
	rs := etagstore.New[receipt](b, nil)
	plainA := etagstore.New[acctA](b, &etagstore.Options{DisableGroupCommit: true})
	const accts, total = 4, 4 * 2 * 1000
	ctx := t.Context()
	for i := range accts {
		if _, err := as.Create(ctx, fmt.Sprintf("a/%d", i), acctA{1000}); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Create(ctx, fmt.Sprintf("b/%d", i), acctB{Cents: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	// move moves n from one account to another; a key "a/i" is as's,
	// "b/i" bs's; via is the Store of A accounts to use.
	move := func(tx *etagstore.Txn, via *etagstore.Store[acctA], from, to string, n int) error {
		add := func(key string, d int) error {
			if key[0] == 'a' {
				v, err := via.In(tx).Get(key)
				if err != nil {
					return err
				}
				v.Bal += d
				return via.In(tx).Put(key, v)
			}
			v, err := bs.In(tx).Get(key)
			if err != nil {
				return err
			}
			v.Cents += d
			return bs.In(tx).Put(key, v)
		}
		if err := add(from, -n); err != nil {
			return err
		}
		return add(to, n)
	}
	const movers, each = 64, 6
	var moved, refused, audits atomic.Int64
	var wg sync.WaitGroup
	for g := range movers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for j := range each {
				if (g/2+j)%5 == 0 { // an audit (both goroutines of a receipt id)
					sum := 0
					err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
						sum = 0
						for i := range accts {
							a, err := as.In(tx).Get(fmt.Sprintf("a/%d", i))
							if err != nil {
								return err
							}
							b, err := bs.In(tx).Get(fmt.Sprintf("b/%d", i))
							if err != nil {
								return err
							}
							sum += a.Bal + b.Cents
						}
						return nil
					})
					if err != nil || sum != total {
						t.Errorf("audit: %d, %v; want %d", sum, err, total)
					}
					audits.Add(1)
					continue
				}
				name := func() string {
					if rng.IntN(2) == 0 {
						return fmt.Sprintf("a/%d", rng.IntN(accts))
					}
					return fmt.Sprintf("b/%d", rng.IntN(accts))
				}
				from, to := name(), name()
				for to == from {
					to = name()
				}
				id := fmt.Sprintf("r/%d/%d", g/2, j) // shared by goroutines 2k and 2k+1
				via := as
				if g%3 == 0 {
					via = plainA
				}
				err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
					if g%2 == 0 {
						if err := rs.In(tx).Create(id, receipt{from, to}); err != nil {
							return err
						}
						return move(tx, via, from, to, 1+j)
					}
					if err := move(tx, via, from, to, 1+j); err != nil {
						return err
					}
					return rs.In(tx).Create(id, receipt{from, to})
				})
				switch {
				case err == nil:
					moved.Add(1)
				case errors.Is(err, etagstore.ErrExists):
					wantOnly(t, "refused move", err, etagstore.ErrExists)
					refused.Add(1)
				default:
					t.Errorf("move %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	sum := 0
	for i := range accts {
		a, _ := as.Get(ctx, fmt.Sprintf("a/%d", i))
		b, _ := bs.Get(ctx, fmt.Sprintf("b/%d", i))
		sum += a.Value.Bal + b.Value.Cents
	}
	if sum != total {
		t.Errorf("the total is %d, want %d", sum, total)
	}
	n := 0
	for _, err := range rs.List(ctx, "r/") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if int64(n) != moved.Load() || moved.Load() != refused.Load() {
		t.Errorf("%d receipts, %d moves committed, %d refused; want receipts = moves = refused", n, moved.Load(), refused.Load())
	}
	t.Logf("%d moves, %d refused, %d audits", moved.Load(), refused.Load(), audits.Load())
}

// A transaction led by a Store with group commit off commits on its own
// while its group's batch is held; one led by a grouped Store that also
// uses the ungrouped one queues, and both commit.
func TestTxMixedDisableGroupCommitLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		grouped := etagstore.New[counter](h, nil)
		plain := etagstore.New[probeDoc](h, &etagstore.Options{DisableGroupCommit: true})
		var wg sync.WaitGroup
		holding(t, grouped, &wg)
		var eQueued error
		wg.Go(func() {
			eQueued = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
				if err := increment("g")(grouped.In(tx)); err != nil {
					return err
				}
				return plain.In(tx).Upsert("p1", probeDoc{Y: "queued"})
			})
		})
		synctest.Wait()
		alone := make(chan error, 1)
		go func() {
			alone <- etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
				if err := plain.In(tx).Upsert("p2", probeDoc{Y: "alone"}); err != nil {
					return err
				}
				return increment("g2")(grouped.In(tx))
			})
		}()
		synctest.Wait()
		select {
		case err := <-alone:
			if err != nil {
				t.Errorf("led by the ungrouped Store: %v", err)
			}
		default:
			t.Errorf("a transaction led by a Store with DisableGroupCommit queued behind the group's held commit")
		}
		close(h.hold)
		wg.Wait()
		if len(alone) > 0 {
			if err := <-alone; err != nil {
				t.Errorf("led by the ungrouped Store: %v", err)
			}
		}
		if eQueued != nil {
			t.Errorf("led by the grouped Store: %v", eQueued)
		}
		for _, k := range []string{"g", "g2"} {
			if d, err := grouped.Get(t.Context(), k); err != nil || d.Value.N != 1 {
				t.Errorf("%s = %+v, %v", k, d.Value, err)
			}
		}
	})
}

// Transact nested inside the first run of a package-level Transact that
// was queued at its first use (its fn runs in the batch's slot): no
// deadlock; both commit.
func TestTxNestedInQueuedFirstRun(t *testing.T) {
	for _, nestedPkg := range []bool{false, true} {
		t.Run(fmt.Sprintf("package-level=%v", nestedPkg), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHeldCommits()
				s := etagstore.New[counter](h, nil)
				var wg sync.WaitGroup
				holding(t, s, &wg)
				var err, nestedErr error
				wg.Go(func() {
					err = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error {
						if err := increment("outer")(s.In(tx)); err != nil { // queued here
							return err
						}
						if nestedPkg {
							nestedErr = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error { return increment("inner")(s.In(tx)) })
						} else {
							_, nestedErr = s.Transact(t.Context(), increment("inner"))
						}
						return nestedErr
					})
				})
				synctest.Wait()
				var e2 error
				wg.Go(func() { _, e2 = s.Transact(t.Context(), increment("other")) })
				synctest.Wait()
				close(h.hold)
				wg.Wait()
				if err != nil || nestedErr != nil || e2 != nil {
					t.Fatalf("outer %v, nested %v, other %v", err, nestedErr, e2)
				}
				if d, _ := s.Get(t.Context(), "outer"); d.Value.N != 1 {
					t.Errorf("outer = %+v, want 1", d.Value)
				}
				if d, _ := s.Get(t.Context(), "inner"); d.Value.N < 1 {
					t.Errorf("inner = %+v, want at least 1", d.Value)
				}
			})
		})
	}
}

// Update whose mutate runs a package-level Transact over the same
// backend, touching another key, while the group is busy: no deadlock.
func TestTxNestedInUpdateMutate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		if _, err := s.Create(t.Context(), "u", counter{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var uerr, terr error
		wg.Go(func() {
			_, uerr = s.Update(t.Context(), "u", func(c *counter) error {
				terr = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error { return increment("t")(s.In(tx)) })
				c.N++
				return terr
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if uerr != nil || terr != nil {
			t.Fatalf("Update %v, nested Transact %v", uerr, terr)
		}
		if d, _ := s.Get(t.Context(), "u"); d.Value.N != 1 {
			t.Errorf("u = %+v", d.Value)
		}
	})
}

func TestTxBatchOneKeyTwoStoresAcrossMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		cs := etagstore.New[counter](h, nil)
		ps := etagstore.New[probeDoc](h, nil)
		ctx := t.Context()
		if _, err := cs.Create(ctx, "k", counter{1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, cs, &wg)
		var e1, e2 error
		wg.Go(func() {
			_, e1 = cs.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				c, err := tx.Get("k")
				if err != nil {
					return err
				}
				return tx.Put("copy", c)
			})
		})
		synctest.Wait()
		wg.Go(func() {
			_, e2 = ps.Transact(ctx, func(tx *etagstore.Tx[probeDoc]) error {
				return tx.Put("k", probeDoc{Y: "retyped"})
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if e1 != nil || e2 != nil {
			t.Fatalf("reader through Store[counter]: %v; writer through Store[probeDoc]: %v", e1, e2)
		}
		if d, err := ps.Get(ctx, "k"); err != nil || d.Value.Y != "retyped" {
			t.Errorf("k = %+v, %v", d.Value, err)
		}
	})
}
