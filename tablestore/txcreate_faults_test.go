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

// Batches of transactions holding Tx.Create on tables, through a proxy
// that loses answers after the commit (and answers 503 at times): every
// title is claimed once, by a transaction that counted itself; a refused
// claim wrote nothing; no failure other than ErrExists (or an unknown
// outcome the reads could not settle, reported and checked against what
// is stored).
func TestTxCreateBatchesUnderLostAnswers(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			txCreateUnderFaults(t, storetest.Faults{Seed: seed, DropAfterCommit: 0.4, Unavailable: 0.1, ResetMidBody: 0.1})
		})
	}
}

func TestTxCreateBatchesUnderLostAnswersAndReads(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			txCreateUnderFaults(t, storetest.Faults{Seed: seed, DropAfterCommit: 0.4, Unavailable: 0.1, ResetMidBody: 0.1, Reads: true})
		})
	}
}

func TestTableGetResetMidBodyIsASentinel(t *testing.T) {
	ctx := t.Context()
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), storetest.Faults{Seed: 1, ResetMidBody: 0.5, Reads: true})
	s := etagstore.New[Task](tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "p"}), &etagstore.Options{CacheSize: -1})
	for i := 0; i < 40; i++ {
		_, err := s.Get(ctx, "k")
		if err == nil || errors.Is(err, etagstore.ErrNotFound) {
			continue
		}
		n := 0
		for _, e := range []error{etagstore.ErrUnavailable, etagstore.ErrOutcomeUnknown, etagstore.ErrConflict, etagstore.ErrStorageNotFound, etagstore.ErrInvalidInput} {
			if errors.Is(err, e) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("Get after %d tries = %v; matches %d sentinels, want 1", i+1, err, n)
		}
	}
}

func txCreateUnderFaults(t *testing.T, f storetest.Faults) {
	ctx := t.Context()
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), f)
	b := tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "p"})
	s := etagstore.New[Task](b, nil)
	claims := etagstore.New[storetest.Claim](b, nil)
	const writers, titles = 40, 8
	var committed, refused, unknown atomic.Int64
	results := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			title := fmt.Sprintf("title-%d", i%titles)
			card := fmt.Sprintf("card-%d", i)
			err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
				if i%2 == 0 {
					if err := claims.In(tx).Create(title, storetest.Claim{Card: card}); err != nil {
						return err
					}
				}
				c, err := s.In(tx).Get("count")
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				c.N++
				if err := s.In(tx).Put("count", c); err != nil {
					return err
				}
				if i%2 == 1 {
					if err := claims.In(tx).Create(title, storetest.Claim{Card: card}); err != nil {
						return err
					}
				}
				return s.In(tx).Create(card, Task{Title: title})
			})
			results[i] = err
			switch {
			case err == nil:
				committed.Add(1)
			case errors.Is(err, etagstore.ErrExists):
				refused.Add(1)
			case errors.Is(err, etagstore.ErrOutcomeUnknown):
				unknown.Add(1)
			case errors.Is(err, etagstore.ErrUnavailable) && !errors.Is(err, etagstore.ErrOutcomeUnknown):
				// throttled until the policy ended: nothing written (checked below)
			default:
				t.Errorf("%s: %v", card, err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d committed, %d refused, %d unknown; faults %v", committed.Load(), refused.Load(), unknown.Load(), proxy.Counts())
	// Read back through the proxy: a read is tried again until it answers
	// (found or not found).
	get := func(key string) (Task, error) {
		for {
			d, err := s.Get(ctx, key)
			if err == nil || errors.Is(err, etagstore.ErrNotFound) || ctx.Err() != nil {
				return d.Value, err
			}
		}
	}
	stored := 0
	for i := range writers {
		card := fmt.Sprintf("card-%d", i)
		_, err := get(card)
		exists := err == nil
		if exists {
			stored++
		}
		switch r := results[i]; {
		case r == nil && !exists:
			t.Errorf("%s committed but is not stored", card)
		case (errors.Is(r, etagstore.ErrExists) || errors.Is(r, etagstore.ErrUnavailable)) && exists:
			t.Errorf("%s refused (%v) but stored", card, r)
		}
	}
	for j := range titles {
		title := fmt.Sprintf("title-%d", j)
		var c etagstore.Doc[storetest.Claim]
		var err error
		for c, err = claims.Get(ctx, title); err != nil && !errors.Is(err, etagstore.ErrNotFound); c, err = claims.Get(ctx, title) {
		}
		if err != nil {
			t.Errorf("%s: %v", title, err)
			continue
		}
		if d, err := get(c.Value.Card); err != nil || d.Title != title {
			t.Errorf("%s is held by %s: %+v, %v", title, c.Value.Card, d, err)
		}
	}
	if stored != titles {
		t.Errorf("%d cards stored, want %d (one per title)", stored, titles)
	}
	if c, err := get("count"); err != nil || c.N != int64(stored) {
		t.Errorf("count = %+v, %v; %d cards stored", c, err, stored)
	}
}
