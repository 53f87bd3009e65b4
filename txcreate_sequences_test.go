package etagstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// Tx.Create followed, in one fn, by another operation on the same key,
// with the key missing or existing: alone, and as the second member of a
// batch.

type createSeq struct {
	name string
	fn   func(t *testing.T, tx *etagstore.Tx[counter]) error
	// missing: the value stored after a commit when k was missing (-1:
	// nothing stored); existing: the error wanted when k exists (nil: the
	// commit succeeds, k as it was).
	missing  int
	existing error
}

var createSeqs = []createSeq{
	{"Get", func(t *testing.T, tx *etagstore.Tx[counter]) error {
		if err := tx.Create("k", counter{1}); err != nil {
			return err
		}
		c, err := tx.Get("k")
		if err != nil || c.N != 1 {
			t.Errorf("Get after Create = %+v, %v; want its own 1", c, err)
		}
		return err
	}, 1, etagstore.ErrExists},
	{"Put", func(t *testing.T, tx *etagstore.Tx[counter]) error {
		if err := tx.Create("k", counter{1}); err != nil {
			return err
		}
		return tx.Put("k", counter{2})
	}, 2, etagstore.ErrExists},
	{"Upsert", func(t *testing.T, tx *etagstore.Tx[counter]) error {
		if err := tx.Create("k", counter{1}); err != nil {
			return err
		}
		return tx.Upsert("k", counter{3})
	}, 3, etagstore.ErrExists},
	{"ETag", func(t *testing.T, tx *etagstore.Tx[counter]) error {
		if err := tx.Create("k", counter{1}); err != nil {
			return err
		}
		_, err := tx.ETag("k")
		return err
	}, 1, etagstore.ErrExists},
	{"Delete", func(t *testing.T, tx *etagstore.Tx[counter]) error {
		if err := tx.Create("k", counter{1}); err != nil {
			return err
		}
		return tx.Delete("k")
	}, -1, etagstore.ErrExists},
	{"CreateTwice", func(t *testing.T, tx *etagstore.Tx[counter]) error {
		if err := tx.Create("k", counter{1}); err != nil {
			return err
		}
		if err := tx.Create("k", counter{4}); !errors.Is(err, etagstore.ErrExists) {
			t.Errorf("second Create of k in one fn = %v, want ErrExists", err)
		}
		return nil
	}, 1, etagstore.ErrExists},
	{"DeleteThenCreate", func(t *testing.T, tx *etagstore.Tx[counter]) error {
		err := tx.Delete("k")
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		return tx.Create("k", counter{5})
	}, 5, nil},
}

// checkCreateSeq checks what the sequence left: err from Transact, and
// k and "side" (which every sequence's transaction also writes).
func checkCreateSeq(t *testing.T, s *etagstore.Store[counter], sq createSeq, existing bool, err error) {
	t.Helper()
	ctx := t.Context()
	k, kerr := s.Get(ctx, "k")
	_, serr := s.Get(ctx, "side")
	switch {
	case existing && sq.existing != nil:
		wantOnly(t, sq.name, err, sq.existing)
		if kerr != nil || k.Value.N != 100 {
			t.Errorf("%s: k = %+v, %v; want the existing 100", sq.name, k.Value, kerr)
		}
		if !errors.Is(serr, etagstore.ErrNotFound) {
			t.Errorf("%s: side written (%v) by a failed transaction", sq.name, serr)
		}
	case existing: // DeleteThenCreate
		if err != nil || k.Value.N != sq.missing {
			t.Errorf("%s: %v, k = %+v", sq.name, err, k.Value)
		}
	case sq.missing < 0:
		if err != nil || !errors.Is(kerr, etagstore.ErrNotFound) || serr != nil {
			t.Errorf("%s: %v; k: %v, side: %v; want k missing, side written", sq.name, err, kerr, serr)
		}
	default:
		if err != nil || kerr != nil || k.Value.N != sq.missing || serr != nil {
			t.Errorf("%s: %v; k = %+v (%v), side %v; want k = %d", sq.name, err, k.Value, kerr, serr, sq.missing)
		}
	}
}

func withSide(t *testing.T, sq createSeq) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		if err := tx.Put("side", counter{9}); err != nil {
			return err
		}
		return sq.fn(t, tx)
	}
}

func TestTxCreateThenSameKeyAlone(t *testing.T) {
	for _, sq := range createSeqs {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/existing=%v", sq.name, existing), func(t *testing.T) {
				s := etagstore.New[counter](newHeldCommitsOpen(), nil)
				if existing {
					if _, err := s.Create(t.Context(), "k", counter{100}); err != nil {
						t.Fatal(err)
					}
				}
				_, err := s.Transact(t.Context(), withSide(t, sq))
				checkCreateSeq(t, s, sq, existing, err)
			})
		}
	}
}

// The same as the second member of a batch whose first member writes
// another key.
func TestTxCreateThenSameKeyInBatch(t *testing.T) {
	for _, sq := range createSeqs {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/existing=%v", sq.name, existing), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newHeldCommits()
					s := etagstore.New[counter](h, nil)
					if existing {
						if _, err := s.Create(t.Context(), "k", counter{100}); err != nil {
							t.Fatal(err)
						}
					}
					e1, e2 := twoInOneBatch(t, h, s, increment("x"), withSide(t, sq))
					if e1 != nil {
						t.Errorf("the other member: %v", e1)
					}
					checkCreateSeq(t, s, sq, existing, e2)
					if d, err := s.Get(t.Context(), "x"); err != nil || d.Value.N != 1 {
						t.Errorf("x = %+v, %v; want 1", d.Value, err)
					}
				})
			})
		}
	}
}

// Create under a fence (WithFence) reads the key: a missing key is
// created carrying the token, an existing one is refused at once.
func TestTxCreateFenced(t *testing.T) {
	s := etagstore.New[counter](newHeldCommitsOpen(), nil)
	ctx := etagstore.WithFence(t.Context(), 7)
	runs := 0
	if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		runs++
		return tx.Create("k", counter{1})
	}); err != nil || runs != 1 {
		t.Fatalf("fenced Create: %v after %d runs", err, runs)
	}
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		err := tx.Create("k", counter{2})
		if !errors.Is(err, etagstore.ErrExists) {
			t.Errorf("fenced Create of an existing key = %v, want ErrExists at once", err)
		}
		return err
	})
	wantOnly(t, "fenced Transact", err, etagstore.ErrExists)
	// A lower token cannot create over the key deleted under a higher one.
	d, _ := s.Get(t.Context(), "k")
	if err := s.Delete(etagstore.WithFence(t.Context(), 9), "k", d.ETag); err != nil {
		t.Fatal(err)
	}
	_, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Create("k", counter{3}) })
	wantOnly(t, "Create under token 7 over a delete under 9", err, etagstore.ErrFenced)
}

// Many fenced Creates of one key at once (each commits on its own): one
// wins, the others fail with ErrExists alone.
func TestTxCreateFencedRacers(t *testing.T) {
	s := etagstore.New[counter](newHeldCommitsOpen(), nil)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Transact(etagstore.WithFence(t.Context(), 3), createAndCount(i, i%2 == 1))
		})
	}
	wg.Wait()
	checkOneCreator(t, s, errs)
}
