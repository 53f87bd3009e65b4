package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// A write fn makes through a Store, outside tx, of a key the transaction
// touches, in fn's first run (before and after its lead is known): the
// transaction fails with ErrInvalidInput and that write lands once.

func selfWriting(s *etagstore.Store[counter]) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		c, err := tx.Get("k")
		if err != nil {
			return err
		}
		if _, err := s.Update(tx2ctx, "k", func(v *counter) error { v.N += 10; return nil }); err != nil {
			return err
		}
		c.N++
		return tx.Put("k", c)
	}
}

var tx2ctx = contextBackground()

func TestTxSelfWriteInFirstRun(t *testing.T) {
	for _, pkg := range []bool{false, true} {
		t.Run(fmt.Sprintf("package-level=%v", pkg), func(t *testing.T) {
			s := etagstore.New[counter](memstore.New(nil), nil)
			if _, err := s.Create(t.Context(), "k", counter{1}); err != nil {
				t.Fatal(err)
			}
			var err error
			if pkg {
				err = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error { return selfWriting(s)(s.In(tx)) })
			} else {
				_, err = s.Transact(t.Context(), selfWriting(s))
			}
			wantOnly(t, "self-writing Transact", err, etagstore.ErrInvalidInput)
			if d, _ := s.Get(t.Context(), "k"); d.Value.N != selfWrites(pkg) {
				t.Errorf("k = %d, want %d: the write fn made outside tx landed once (package-level: once per run, two runs)", d.Value.N, selfWrites(pkg))
			}
		})
	}
}

// The same in a queued first run (its fn continues in the batch's slot).
func TestTxSelfWriteInQueuedFirstRun(t *testing.T) {
	for _, pkg := range []bool{false, true} {
		t.Run(fmt.Sprintf("package-level=%v", pkg), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHeldCommits()
				s := etagstore.New[counter](h, nil)
				if _, err := s.Create(t.Context(), "k", counter{1}); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				holding(t, s, &wg)
				var err error
				wg.Go(func() {
					if pkg {
						err = etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error { return selfWriting(s)(s.In(tx)) })
					} else {
						_, err = s.Transact(t.Context(), selfWriting(s))
					}
				})
				synctest.Wait()
				close(h.hold)
				wg.Wait()
				if !errors.Is(err, etagstore.ErrInvalidInput) {
					t.Errorf("self-writing Transact = %v, want ErrInvalidInput", err)
				}
				if d, _ := s.Get(t.Context(), "k"); d.Value.N != selfWrites(pkg) {
					t.Errorf("k = %d, want %d: the write fn made outside tx landed once (package-level: once per run, two runs)", d.Value.N, selfWrites(pkg))
				}
			})
		})
	}
}

func contextBackground() context.Context { return context.Background() }

// selfWrites is k after a self-writing transaction: Store.Transact's fn
// runs inside its Store's Reentry from the start, so the write outside tx
// lands once (11); a package-level Transact's first run knows no Store
// until its first use, so that run's write lands too, and the second run,
// inside its lead's Reentry, fails at once (21; documented on Transact).
func selfWrites(pkg bool) int {
	if pkg {
		return 21
	}
	return 11
}
