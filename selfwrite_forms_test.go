package etagstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

type nestOther struct{ S string }

// A package-level Transact nested in a mutate of "k" that writes "k"
// through the mutate's own Store, after first using another Store on the
// same backend (which becomes the transaction's lead): the nested write
// lands once and the outer Update fails at once, as for s.Transact.
func TestSelfWritePackageTransactOtherLead(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			b := memstore.New(nil)
			opts := cfg.opts
			s := etagstore.New[nestDoc](b, &opts)
			s2 := etagstore.New[nestOther](b, &opts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if _, err := s.Create(ctx, "k", nestDoc{}); err != nil {
				t.Fatal(err)
			}
			runs := 0
			_, err := s.Update(ctx, "k", func(d *nestDoc) error {
				runs++
				if err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
					if err := s2.In(tx).Put("other", nestOther{S: "x"}); err != nil {
						return err
					}
					cur, err := s.In(tx).Get("k")
					if err != nil {
						return err
					}
					cur.N += 10
					return s.In(tx).Put("k", cur)
				}); err != nil {
					return err
				}
				d.N++
				return nil
			})
			wantSelfWrite(t, err, "Transact")
			if runs != 1 {
				t.Errorf("mutate ran %d times; want once", runs)
			}
			if got, err := s.Get(t.Context(), "k"); err != nil || got.Value.N != 10 {
				t.Errorf("k = %+v, %v; want N = 10 (the nested write once)", got.Value, err)
			}
		})
	}
}

// Save's MergeFunc is user code run again on every lost race, like a
// mutate: a merge that writes the key it merges makes every attempt lose
// to it. The Save must not commit the merge's write once per attempt until
// its policy ends.
func TestSelfWriteSaveMergeFunc(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			opts := cfg.opts
			s := etagstore.New[nestDoc](memstore.New(nil), &opts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			base, err := s.Create(ctx, "k", nestDoc{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Upsert(ctx, "k", nestDoc{N: 1}); err != nil { // base is stale: Save merges
				t.Fatal(err)
			}
			merges := 0
			_, err = s.Save(ctx, base, nestDoc{N: 5}, func(_, mine, theirs nestDoc) (nestDoc, error) {
				merges++
				if _, err := s.Update(ctx, "k", func(d *nestDoc) error { d.N += 1000; return nil }); err != nil {
					return nestDoc{}, err
				}
				return mine, nil
			})
			got, _ := s.Get(t.Context(), "k")
			if merges > 1 || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, etagstore.ErrOutcomeUnknown) {
				t.Errorf("Save = %v after %d merges; k.N = %d: the merge's nested write committed %d times", err, merges, got.Value.N, (got.Value.N-1)/1000)
			}
		})
	}
}

// Store.Transact's fn is user code run again on a lost race: an fn that
// reads "k" in the transaction and writes "k" outside it (a nested Update
// through its own Store) would lose every commit to its own write. It
// fails the transaction at once with ErrInvalidInput, the outside write
// landed once and fn run once, grouped or not. An fn that writes another
// key outside the transaction is only a side effect: it commits.
func TestSelfWriteTransactFnWritesOutside(t *testing.T) {
	for _, cfg := range selfWriteConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			opts := cfg.opts
			s := etagstore.New[nestDoc](memstore.New(nil), &opts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			for _, key := range []string{"k", "side"} {
				if _, err := s.Create(ctx, key, nestDoc{}); err != nil {
					t.Fatal(err)
				}
			}
			runs := 0
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[nestDoc]) error {
				runs++
				v, err := tx.Get("k")
				if err != nil {
					return err
				}
				if _, err := s.Update(ctx, "k", func(d *nestDoc) error { d.N += 1000; return nil }); err != nil {
					return err
				}
				v.N++
				return tx.Put("k", v)
			})
			if !errors.Is(err, etagstore.ErrInvalidInput) || errors.Is(err, etagstore.ErrConflict) || runs != 1 {
				t.Errorf("Transact whose fn writes its key outside tx = %v after %d runs; want ErrInvalidInput alone after 1", err, runs)
			}
			if got, err := s.Get(ctx, "k"); err != nil || got.Value.N != 1000 {
				t.Errorf("k = %+v, %v; want N = 1000 (the outside write once, the transaction's not)", got.Value, err)
			}
			_, err = s.Transact(ctx, func(tx *etagstore.Tx[nestDoc]) error {
				if _, err := s.Update(ctx, "side", func(d *nestDoc) error { d.N++; return nil }); err != nil {
					return err
				}
				v, err := tx.Get("k")
				if err != nil {
					return err
				}
				v.N++
				return tx.Put("k", v)
			})
			if err != nil {
				t.Errorf("Transact whose fn writes another key outside tx = %v, want nil", err)
			}
		})
	}
}
