package etagstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Batches of transactions: what each caller gets back, its documents and
// the Tx it kept, as when it commits on its own.

// The Tx kept after Store.Transact: ETag reports the new ETag, Put fails.
func TestTxBatchKeptTxAfterCommit(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[counter](newHeldCommits().Backend, nil)
	var kept *etagstore.Tx[counter]
	docs, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
		kept = tx
		return tx.Put("k", counter{1})
	})
	if err != nil || len(docs) != 1 {
		t.Fatal(docs, err)
	}
	if got, err := kept.ETag("k"); got != docs[0].ETag {
		t.Errorf("after the commit tx.ETag(k) = %q, %v; the commit made %q", got, err, docs[0].ETag)
	}
	if err := kept.Put("k", counter{2}); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("Put after the commit = %v, want ErrInvalidInput", err)
	}
}

// The Tx of a batch member other than the last, kept after the
// commit: ETag reports the new ETag, Put fails.
func TestTxBatchKeptTxOfEarlierMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var kept *etagstore.Tx[counter]
		var docs []etagstore.Doc[counter]
		wg.Go(func() {
			var err error
			docs, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				kept = tx
				return tx.Put("k", counter{1})
			})
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("other")); err != nil {
				t.Errorf("B: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if got, err := kept.ETag("k"); len(docs) != 1 || got != docs[0].ETag {
			t.Errorf("after the commit tx.ETag(k) = %q, %v; the commit made %v", got, err, docs)
		}
		if err := kept.Put("k", counter{2}); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Put after the commit = %v, want ErrInvalidInput", err)
		}
	})
}

// B only reads k, which A (earlier in the batch) wrote; after the commit
// B's kept Tx reports for k the ETag of the version A replaced.
func TestTxBatchKeptTxETagOfInheritedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		d0, err := s.Create(t.Context(), "k", counter{1})
		if err != nil {
			t.Fatal(err)
		}
		var kept *etagstore.Tx[counter]
		read := func(tx *etagstore.Tx[counter]) error {
			kept = tx
			if _, err := tx.Get("k"); err != nil {
				return err
			}
			return tx.Put("other", counter{1})
		}
		e1, e2 := twoInOneBatch(t, h, s, increment("k"), read)
		if e1 != nil || e2 != nil {
			t.Fatal(e1, e2)
		}
		cur, _ := s.Get(t.Context(), "k")
		if got, _ := kept.ETag("k"); got == d0.ETag {
			t.Errorf("kept.ETag(k) = %q, the version before A's write (B saw A's, now %q)", got, cur.ETag)
		}
	})
}

// Docs come in the order fn first touched their keys; a Get of a key
// an earlier member wrote is a touch.
func TestTxBatchDocsOrderInheritedGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			if _, err := s.Transact(ctx, increment("x")); err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		var docs []etagstore.Doc[counter]
		wg.Go(func() {
			var err error
			docs, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
				x, err := tx.Get("x") // first touch: x
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				if err := tx.Put("y", counter{1}); err != nil {
					return err
				}
				x.N += 10
				return tx.Put("x", x)
			})
			if err != nil {
				t.Errorf("B: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		var keys []string
		for _, d := range docs {
			keys = append(keys, d.Key)
		}
		if len(keys) != 2 || keys[0] != "x" {
			t.Errorf("B's docs in key order %v; fn touched x first, then y", keys)
		}
	})
}

// A creates k, B (same batch) deletes it: A still gets its Doc, superseded.
func TestTxBatchCreateThenDeleteDocs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		ctx := t.Context()
		var wg sync.WaitGroup
		holding(t, s, &wg)
		var aDocs []etagstore.Doc[counter]
		wg.Go(func() {
			var err error
			aDocs, err = s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Put("k", counter{1}) })
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			if _, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error { return tx.Delete("k") }); err != nil {
				t.Errorf("B: %v", err)
			}
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if len(aDocs) != 1 || !aDocs[0].ETag.Superseded() {
			t.Errorf("A's docs = %+v; want k with a Superseded ETag", aDocs)
		}
		if _, err := s.Get(ctx, "k"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("k: %v, want not found", err)
		}
	})
}

// readManyCounted is heldCommits whose ReadMany and Read calls are counted.
type readManyCounted struct {
	*heldCommits
	readMany, reads atomic.Int64
}

func (c *readManyCounted) Read(ctx context.Context, key string) (driver.Item, error) {
	c.reads.Add(1)
	return c.heldCommits.Read(ctx, key)
}

func (c *readManyCounted) Abilities() driver.Abilities {
	a := c.heldCommits.Abilities()
	many := a.ReadMany
	a.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
		c.readMany.Add(1)
		return many(ctx, keys)
	}
	return a
}

// A batch reads the keys its members' fns read first, and that no cache
// holds, together (one ReadMany): the fns find them read, and none reads
// on its own.
func TestTxBatchReadsFirstKeysTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &readManyCounted{heldCommits: newHeldCommits()}
		writer := etagstore.New[counter](c.Backend, nil)
		for _, k := range []string{"a", "b", "c"} {
			if _, err := writer.Create(t.Context(), k, counter{1}); err != nil {
				t.Fatal(err)
			}
		}
		s := etagstore.New[counter](c, nil) // its cache holds none of them
		var wg sync.WaitGroup
		holding(t, s, &wg)
		for _, k := range []string{"a", "b", "c", "d"} { // d is missing
			wg.Go(func() {
				if _, err := s.Transact(t.Context(), increment(k)); err != nil {
					t.Errorf("%s: %v", k, err)
				}
			})
			synctest.Wait()
		}
		reads := c.reads.Load()
		close(c.hold)
		wg.Wait()
		if n := c.readMany.Load(); n != 1 {
			t.Errorf("ReadMany called %d times, want 1", n)
		}
		if n := c.reads.Load() - reads; n != 0 {
			t.Errorf("%d reads after the batch formed, want 0: every first key was read ahead", n)
		}
		for k, want := range map[string]int{"a": 2, "b": 2, "c": 2, "d": 1} {
			if d, err := s.Get(t.Context(), k); err != nil || d.Value.N != want {
				t.Errorf("%s = %+v, %v; want %d", k, d.Value, err, want)
			}
		}
	})
}

// gatedChecks is heldCommits whose commit of checks alone of "g" (a
// member's check of its reads after its fn failed) waits for release.
type gatedChecks struct {
	*heldCommits
	release chan struct{}
}

func (g gatedChecks) Abilities() driver.Abilities {
	a := g.heldCommits.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		checksOfG := len(actions) > 0
		for _, ac := range actions {
			checksOfG = checksOfG && ac.Check && ac.Key == "g"
		}
		if checksOfG {
			<-g.release
		}
		return commit(ctx, actions)
	}
	return a
}

// A member whose fn fails leaves the batch at once: the check of its
// reads runs on its caller's goroutine, and the members after it commit
// without waiting for it.
func TestTxBatchFailedMemberCheckedOutsideTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := gatedChecks{heldCommits: newHeldCommits(), release: make(chan struct{})}
		s := etagstore.New[counter](g, nil)
		if _, err := s.Create(t.Context(), "g", counter{1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		holding(t, s, &wg)
		refused := errors.New("refused")
		aDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("g"); err != nil {
					return err
				}
				return refused
			})
			aDone <- err
		})
		synctest.Wait()
		bDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(t.Context(), increment("b"))
			bDone <- err
		})
		synctest.Wait()
		close(g.hold)
		synctest.Wait()
		select {
		case err := <-bDone:
			if err != nil {
				t.Errorf("B: %v", err)
			}
		default:
			t.Fatal("B waits for A's check of its reads")
		}
		select {
		case err := <-aDone:
			t.Fatalf("A returned %v before its check", err)
		default:
		}
		close(g.release)
		if err := <-aDone; err != refused {
			t.Errorf("A = %v, want its own error once its reads were found current", err)
		}
		wg.Wait()
	})
}
