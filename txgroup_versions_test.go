package etagstore_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// Batches of transactions: checks of a caller's version (tx.ETag,
// compare-and-swap) and write skew hold as they do serially.

var errStaleVersion = errors.New("the caller's version is stale")

// tx.ETag of a key an earlier member of the batch wrote matches no version
// held: a check of a caller's version fails, and no update is lost.
func TestTxBatchETagOfInheritedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		d0, err := s.Create(ctx, "k", counter{1})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("k")); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var bErr error
		wg.Go(func() {
			_, bErr = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				et, err := tx.ETag("k")
				if err != nil {
					return err
				}
				if et != d0.ETag {
					return errStaleVersion
				}
				return tx.Put("k", counter{100}) // the caller's edit of d0
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		k, _ := s.Get(ctx, "k")
		switch {
		case bErr == nil && k.Value.N != 101: // B (on its own) went first, then A
			t.Errorf("B's check of version %q passed, and k = %d: want 101 (B's 100, then A's increment)", d0.ETag, k.Value.N)
		case bErr != nil && (!errors.Is(bErr, errStaleVersion) || k.Value.N != 2):
			t.Errorf("B = %v, k = %d: want errStaleVersion and A's increment alone (2)", bErr, k.Value.N)
		}
	})
}

// Two compare-and-swaps on one version (as docstore's atomic writes with
// revisions): one succeeds.
func TestTxBatchTwoCASOnOneVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		d0, err := s.Create(ctx, "k", counter{1})
		if err != nil {
			t.Fatal(err)
		}
		cas := func(v int) func(tx *etagstore.Tx[counter]) error {
			return func(tx *etagstore.Tx[counter]) error {
				et, err := tx.ETag("k")
				if err != nil {
					return err
				}
				if et != d0.ETag {
					return errStaleVersion
				}
				return tx.Put("k", counter{v})
			}
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var errs [2]error
		for i := range 2 {
			wg.Go(func() { _, errs[i] = s.Transact(ctx, cas(10+i)) })
			synctest.Wait()
		}
		close(h.hold)
		wg.Wait()
		if errs[0] == nil && errs[1] == nil {
			k, _ := s.Get(ctx, "k")
			t.Errorf("both swaps of version %s succeeded; k = %d", d0.ETag, k.Value.N)
		}
	})
}

var errStaleRev = errors.New("the client's revision is not current")

// A fn checks a caller's revision with tx.ETag after its own Put (the
// order is free: ETag is "the version the transaction read"). Serially,
// after the first transaction's commit the revision is stale; in one
// batch too: the second fn's check must see that the first changed k, so
// that both cannot commit (no increment overwritten on a stale revision).
func TestTxBatchETagAfterOwnPutOverInherited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		d, err := s.Create(t.Context(), "k", counter{1})
		if err != nil {
			t.Fatal(err)
		}
		rev := d.ETag // the client's revision
		casPut := func(tx *etagstore.Tx[counter]) error {
			if err := tx.Put("k", counter{100}); err != nil {
				return err
			}
			cur, err := tx.ETag("k")
			if err != nil {
				return err
			}
			if cur != rev {
				return errStaleRev
			}
			return nil
		}
		e1, e2 := twoInOneBatch(t, h, s, increment("k"), casPut)
		got, _ := s.Get(t.Context(), "k")
		if e1 == nil && e2 == nil {
			t.Errorf("both committed: the second's revision check passed on %q, though the first had changed k (now N=%d): lost update", rev, got.Value.N)
		}
	})
}

// The write-skew conformance case with both transactions on one Store.
func TestTxBatchWriteSkewOneStore(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[counter](newHeldCommits().Backend, nil)
	for _, k := range []string{"skew-a", "skew-b"} {
		if _, err := s.Create(ctx, k, counter{1}); err != nil {
			t.Fatal(err)
		}
	}
	clear := func(mine, other string, read chan<- struct{}, wait <-chan struct{}) func(*etagstore.Tx[counter]) error {
		first := true
		return func(tx *etagstore.Tx[counter]) error {
			p, err := tx.Get(mine)
			if err != nil {
				return err
			}
			o, err := tx.Get(other)
			if err != nil {
				return err
			}
			if first {
				first = false
				close(read)
				<-wait
			}
			if o.N == 0 {
				return nil
			}
			p.N = 0
			return tx.Put(mine, p)
		}
	}
	aRead, bRead := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var aErr, bErr error
	wg.Go(func() { _, aErr = s.Transact(ctx, clear("skew-a", "skew-b", aRead, bRead)) })
	wg.Go(func() { _, bErr = s.Transact(ctx, clear("skew-b", "skew-a", bRead, aRead)) })
	wg.Wait()
	if aErr != nil || bErr != nil {
		t.Fatalf("Transact: %v, %v", aErr, bErr)
	}
	a, _ := s.Get(ctx, "skew-a")
	b, _ := s.Get(ctx, "skew-b")
	if a.Value.N+b.Value.N != 1 {
		t.Errorf("A=%d B=%d", a.Value.N, b.Value.N)
	}
}
