package tablestore_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Batches of transactions on tables: a member that writes nothing is
// checked by reading again, and never gets an unknown outcome.

// A read-only transaction over two partitions succeeds alone and through
// the queue alike (its reads are read again, never committed together).
func TestTxBatchTablesReadOnlyAcrossPartitions(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), nil)
	seed := etagstore.New[Task](b, nil)
	for _, k := range []string{"p1/a", "p2/b"} {
		if _, err := seed.Create(ctx, k, Task{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, grouped := range []bool{false, true} {
		s := etagstore.New[Task](b, &etagstore.Options{DisableGroupCommit: !grouped})
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			_, e1 := tx.Get("p1/a")
			_, e2 := tx.Get("p2/b")
			return errors.Join(e1, e2)
		})
		t.Logf("grouped=%v: %v", grouped, err)
		if err != nil {
			t.Errorf("read-only over two partitions, grouped=%v: %v", grouped, err)
		}
	}
}

// A read-only member, in one batch behind a writer: its reads are read
// again, as on its own (tables cannot check an absent key in a commit).
func TestTxBatchTablesReadOnlyMemberTornAbsence(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	s := etagstore.New[Task](h, &etagstore.Options{CacheSize: -1})
	other := etagstore.New[Task](h, &etagstore.Options{DisableGroupCommit: true})
	if _, err := s.Create(ctx, "k", Task{}); err != nil {
		t.Fatal(err)
	}
	var sawMissing bool
	var sawK int64
	runs := 0
	inOneBatch(t, h, holdTask(t, s, "hold"), func() {
		if _, err := s.Transact(ctx, incTask("j")); err != nil {
			t.Errorf("writer: %v", err)
		}
	}, func() {
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			runs++
			_, err := tx.Get("x")
			sawMissing = errors.Is(err, etagstore.ErrNotFound)
			if runs == 1 {
				if _, err := other.Create(ctx, "x", Task{N: 1}); err != nil {
					return err
				}
				if _, err := other.Update(ctx, "k", func(v *Task) error { v.N = 1; return nil }); err != nil {
					return err
				}
			}
			v, err := tx.Get("k")
			sawK = v.N
			return err
		})
		if err != nil {
			t.Errorf("reader: %v", err)
		}
	})
	t.Logf("reader: %d runs, x missing %v, k.N %d", runs, sawMissing, sawK)
	if sawMissing && sawK == 1 {
		t.Errorf("the reader returned on x missing and k.N == 1: never current together")
	}
}

// A read-only member of a batch whose commit's answer is lost and cannot
// be resolved (a delete) gets no unknown outcome: it wrote nothing.
func TestTxBatchTablesReadOnlyMemberUnknown(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	s := etagstore.New[Task](h, nil)
	for _, k := range []string{"gone", "kept"} {
		if _, err := s.Create(ctx, k, Task{}); err != nil {
			t.Fatal(err)
		}
	}
	h.loseNext.Store(true)
	var delErr, readErr error
	inOneBatch(t, h, holdTask(t, s, "hold"), func() {
		_, delErr = s.Transact(ctx, func(tx *etagstore.Tx[Task]) error { return tx.Delete("gone") })
	}, func() {
		_, readErr = s.Transact(ctx, func(tx *etagstore.Tx[Task]) error { _, err := tx.Get("kept"); return err })
	})
	t.Logf("deleter: %v; reader: %v", delErr, readErr)
	if errors.Is(readErr, etagstore.ErrOutcomeUnknown) {
		t.Errorf("read-only member: %v; it wrote nothing", readErr)
	}
}

// Transfers and read-only sums through the queue, with lost answers
// (the fault proxy): sums always whole, none unknown for a read.
func TestTxBatchTablesLostAnswers(t *testing.T) {
	ctx := t.Context()
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), storetest.Faults{Seed: 7, DropAfterCommit: 0.2, Unavailable: 0.05})
	b := tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "p"})
	s := etagstore.New[Task](b, nil)
	const accounts, total = 4, 100
	keys := make([]string, accounts)
	for i := range keys {
		keys[i] = fmt.Sprintf("acct%d", i)
		for {
			_, err := s.Upsert(ctx, keys[i], Task{N: total / accounts})
			if err == nil {
				break
			}
		}
	}
	var wg sync.WaitGroup
	var unknown, readUnknown atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := range 12 {
				from, to := keys[(g+i)%accounts], keys[(g+2*i+1)%accounts]
				if from == to {
					continue
				}
				_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
					f, err := tx.Get(from)
					if err != nil {
						return err
					}
					tt, err := tx.Get(to)
					if err != nil {
						return err
					}
					f.N, tt.N = f.N-1, tt.N+1
					return errors.Join(tx.Put(from, f), tx.Put(to, tt))
				})
				switch {
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					unknown.Add(1)
				case err != nil:
					t.Errorf("transfer: %v", err)
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 12 {
				sum := int64(0)
				_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
					sum = 0
					for _, k := range keys {
						v, err := tx.Get(k)
						if err != nil {
							return err
						}
						sum += v.N
					}
					return nil
				})
				switch {
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					readUnknown.Add(1)
				case err != nil:
					t.Errorf("sum: %v", err)
				case sum != total:
					t.Errorf("a read-only sum saw %d, want %d", sum, total)
				}
			}
		})
	}
	wg.Wait()
	sum := int64(0)
	for _, k := range keys {
		v, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		sum += v.Value.N
	}
	if sum != total {
		t.Errorf("final sum %d, want %d", sum, total)
	}
	if readUnknown.Load() > 0 {
		t.Errorf("%d read-only sums got an unknown outcome", readUnknown.Load())
	}
	t.Logf("transfers unknown: %d; faults %v", unknown.Load(), proxy.Counts())
}
