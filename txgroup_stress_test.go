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
)

// Batches of transactions under stress: money is conserved through
// transfers, audits, panics, slow fns, nested Transacts and leavers.

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
