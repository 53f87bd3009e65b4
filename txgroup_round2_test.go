package etagstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
)

// seedUnknown stores {"N":1,"x":"old"} under k: "x" is a member counter does not know.
func seedUnknown(t *testing.T, h *heldCommits, k string) {
	t.Helper()
	raw := etagstore.New[json.RawMessage](h, &etagstore.Options{DisableGroupCommit: true})
	if _, err := raw.Upsert(context.Background(), k, json.RawMessage(`{"N":1,"x":"old"}`)); err != nil {
		t.Fatal(err)
	}
}

func storedRaw(t *testing.T, h *heldCommits, k string) string {
	t.Helper()
	raw := etagstore.New[json.RawMessage](h, &etagstore.Options{DisableGroupCommit: true})
	d, err := raw.Get(context.Background(), k)
	if err != nil {
		return "missing: " + err.Error()
	}
	return string(d.Value)
}

// twoInOneBatch runs first then second as two Transacts queued behind a
// held one, so that they go in one batch, in that order.
func twoInOneBatch(t *testing.T, h *heldCommits, s *etagstore.Store[counter], first, second func(tx *etagstore.Tx[counter]) error) (e1, e2 error) {
	var wg sync.WaitGroup
	holding(t, s, &wg)
	wg.Go(func() { _, e1 = s.Transact(t.Context(), first) })
	synctest.Wait()
	wg.Go(func() { _, e2 = s.Transact(t.Context(), second) })
	synctest.Wait()
	close(h.hold)
	wg.Wait()
	return e1, e2
}

func del(k string) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error { return tx.Delete(k) }
}

func recreate(k string) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error {
		if _, err := tx.Get(k); !errors.Is(err, etagstore.ErrNotFound) {
			return errors.New("want not found, got " + errString(err))
		}
		return tx.Put(k, counter{7})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Serially: one transaction deletes k, the next finds it missing and
// creates it: the document holds nothing of the deleted one.
func TestTxBatchDeleteThenRecreateSerial(t *testing.T) {
	h := newHeldCommits()
	close(h.hold)
	seedUnknown(t, h, "k")
	s := etagstore.New[counter](h, nil)
	if _, err := s.Transact(t.Context(), del("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transact(t.Context(), recreate("k")); err != nil {
		t.Fatal(err)
	}
	if got := storedRaw(t, h, "k"); strings.Contains(got, "old") {
		t.Errorf("serial: stored %s, the deleted document's member survived", got)
	}
}

// The same two transactions in one batch must give the same document.
func TestTxBatchDeleteThenRecreateInOneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		seedUnknown(t, h, "k")
		s := etagstore.New[counter](h, nil)
		e1, e2 := twoInOneBatch(t, h, s, del("k"), recreate("k"))
		if e1 != nil || e2 != nil {
			t.Fatalf("Transacts: %v, %v", e1, e2)
		}
		if got := storedRaw(t, h, "k"); strings.Contains(got, "old") {
			t.Errorf("batch: stored %s, the member \"x\" of the document the first transaction deleted survived the second's create", got)
		}
	})
}

// Upsert writes T alone (drops "x"); a Put by the next transaction must
// not bring "x" back.
func TestTxBatchUpsertThenPutInOneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		seedUnknown(t, h, "k")
		s := etagstore.New[counter](h, nil)
		up := func(tx *etagstore.Tx[counter]) error { return tx.Upsert("k", counter{5}) }
		put := func(tx *etagstore.Tx[counter]) error {
			c, err := tx.Get("k")
			if err != nil {
				return err
			}
			c.N++
			return tx.Put("k", c)
		}
		e1, e2 := twoInOneBatch(t, h, s, up, put)
		if e1 != nil || e2 != nil {
			t.Fatalf("Transacts: %v, %v", e1, e2)
		}
		if got := storedRaw(t, h, "k"); strings.Contains(got, "old") || !strings.Contains(got, `"N":6`) {
			t.Errorf("batch: stored %s, want {\"N\":6} (the Upsert dropped \"x\")", got)
		}
	})
}

// Serial baseline of the above.
func TestTxBatchUpsertThenPutSerial(t *testing.T) {
	h := newHeldCommits()
	close(h.hold)
	seedUnknown(t, h, "k")
	s := etagstore.New[counter](h, nil)
	if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error { return tx.Upsert("k", counter{5}) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transact(t.Context(), increment("k")); err != nil {
		t.Fatal(err)
	}
	if got := storedRaw(t, h, "k"); strings.Contains(got, "old") {
		t.Errorf("serial: stored %s", got)
	}
}

// Within ONE transaction: Delete then Put.
func TestTxBatchDeleteThenPutOneTx(t *testing.T) {
	h := newHeldCommits()
	close(h.hold)
	seedUnknown(t, h, "k")
	s := etagstore.New[counter](h, nil)
	if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
		if err := tx.Delete("k"); err != nil {
			return err
		}
		return tx.Put("k", counter{7})
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("one tx: stored %s", storedRaw(t, h, "k"))
}

var _ = runtime.NumGoroutine

var errStaleRev = errors.New("the client's revision is not current")

// A fn checks a caller's revision with tx.ETag after its own Put (the
// order is free: ETag is "the version the transaction read"). Serially,
// after the first transaction's commit the revision is stale; in one
// batch the second fn sees the stored ETag, although its view holds the
// first's write: it overwrites the first's increment on a stale revision.
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

// The first member of a batch (whose context's values the batch runs
// under) leaves after its turn: the others commit, and nothing of it.
func TestTxBatchFirstMemberLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		ctx1, cancel1 := context.WithCancel(t.Context())
		var e1, e2 error
		wg.Go(func() { _, e1 = s.Transact(ctx1, increment("a")) })
		synctest.Wait()
		first := true
		wg.Go(func() {
			_, e2 = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				if first {
					first = false
					cancel1()
					synctest.Wait()
				}
				return increment("b")(tx)
			})
		})
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if !errors.Is(e1, context.Canceled) || e2 != nil {
			t.Errorf("Transacts: %v, %v; want Canceled, nil", e1, e2)
		}
		if _, err := s.Get(t.Context(), "a"); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("a: %v, want not found", err)
		}
		if d, err := s.Get(t.Context(), "b"); err != nil || d.Value.N != 1 {
			t.Errorf("b: %+v %v", d, err)
		}
	})
}

// No goroutine is left once the Store is idle.
func TestTxBatchNoGoroutineLeft(t *testing.T) {
	s := etagstore.New[counter](newHeldCommitsOpen(), nil)
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			k := string(rune('a' + i%5))
			if _, err := s.Transact(t.Context(), increment(k)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && runtime.NumGoroutine() > before; { // observation only
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func newHeldCommitsOpen() *heldCommits {
	h := newHeldCommits()
	close(h.hold)
	return h
}

// A member that reads 150 keys, behind one that wrote some of them.
func TestTxBatchManyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, nil)
		keys := make([]string, 150)
		for i := range keys {
			keys[i] = "k" + string(rune('A'+i/26)) + string(rune('a'+i%26))
		}
		sum := func(tx *etagstore.Tx[counter]) error {
			total := 0
			for _, k := range keys {
				c, err := tx.Get(k)
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				total += c.N
			}
			return tx.Put("sum", counter{total})
		}
		writeAll := func(tx *etagstore.Tx[counter]) error {
			for _, k := range keys[:100] {
				if err := increment(k)(tx); err != nil {
					return err
				}
			}
			return nil
		}
		e1, e2 := twoInOneBatch(t, h, s, writeAll, sum)
		if e1 != nil || e2 != nil {
			t.Fatal(e1, e2)
		}
		if d, _ := s.Get(t.Context(), "sum"); d.Value.N != 100 {
			t.Errorf("sum %d, want 100", d.Value.N)
		}
	})
}

func upsert(k string, n int) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error { return tx.Upsert(k, counter{n}) }
}

// Two blind Upserts of k in one batch: each writes T alone, so "x" goes.
func TestTxBatchUpsertUpsertInOneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		seedUnknown(t, h, "k")
		s := etagstore.New[counter](h, nil)
		e1, e2 := twoInOneBatch(t, h, s, upsert("k", 5), upsert("k", 6))
		if e1 != nil || e2 != nil {
			t.Fatal(e1, e2)
		}
		if got := storedRaw(t, h, "k"); got != `{"N":6}` {
			t.Errorf("batch: stored %s, want {\"N\":6}", got)
		}
	})
}

// The same in one transaction.
func TestTxBatchUpsertUpsertOneTx(t *testing.T) {
	h := newHeldCommitsOpen()
	seedUnknown(t, h, "k")
	s := etagstore.New[counter](h, nil)
	if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
		if err := tx.Upsert("k", counter{5}); err != nil {
			return err
		}
		return tx.Upsert("k", counter{6})
	}); err != nil {
		t.Fatal(err)
	}
	if got := storedRaw(t, h, "k"); got != `{"N":6}` {
		t.Errorf("one tx: stored %s, want {\"N\":6}", got)
	}
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

// A's fn is stuck in a read of "gate" (a backend read that does not
// return: throttled, a stalled connection). B, queued behind A in the
// same batch, touches nothing of A's: on its own it would commit at once.
func TestTxBatchStuckReadHoldsTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := gatedReads{heldCommits: newHeldCommits(), gate: make(chan struct{}), reading: make(chan struct{}, 1)}
		s := etagstore.New[counter](g, nil)
		var wg sync.WaitGroup
		holding(t, s, &wg)
		wg.Go(func() {
			_, err := s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
				if _, err := tx.Get("gate"); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				return increment("a")(tx)
			})
			if err != nil {
				t.Errorf("A: %v", err)
			}
		})
		synctest.Wait()
		bDone := make(chan error, 1)
		wg.Go(func() {
			_, err := s.Transact(t.Context(), increment("b"))
			bDone <- err
		})
		synctest.Wait()
		close(g.hold)
		<-g.reading
		start := time.Now()
		select {
		case err := <-bDone:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(time.Minute):
			t.Errorf("B still waiting after %v while A's fn is inside a read", time.Since(start))
		}
		close(g.gate)
		wg.Wait()
	})
}

// fn ends its goroutine (t.FailNow, runtime.Goexit inside fn): is the
// Store's runner left behind?
func TestTxBatchGoexitInFn(t *testing.T) {
	s := etagstore.New[counter](newHeldCommitsOpen(), nil)
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Transact(context.Background(), func(tx *etagstore.Tx[counter]) error {
			runtime.Goexit()
			return nil
		})
	}()
	<-done
	deadline := time.Now().Add(5 * time.Second) // observation only
	for time.Now().Before(deadline) && runtime.NumGoroutine() > before {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		st := string(buf[:runtime.Stack(buf, true)])
		if strings.Contains(st, "txRun") {
			t.Errorf("runner goroutine still alive 5 s after the caller exited (%d > %d goroutines)", n, before)
		}
	}
	// A later caller is delayed by the stuck turn, then works.
	if _, err := s.Transact(context.Background(), increment("k")); err != nil {
		t.Error(err)
	}
}

// A document written under fencing token 5 is deleted by A and created
// again by B in one batch. Serially B's document is new (no token); in
// the batch it keeps the deleted one's token: a writer fenced with 3
// (a lock of the new document's own) is refused.
func TestTxBatchDeleteThenRecreateKeepsFence(t *testing.T) {
	for _, batched := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			h := newHeldCommits()
			s := etagstore.New[counter](h, nil)
			ctx := t.Context()
			if _, err := s.Create(etagstore.WithFence(ctx, 5), "k", counter{1}); err != nil {
				t.Fatal(err)
			}
			if batched {
				if e1, e2 := twoInOneBatch(t, h, s, del("k"), recreate("k")); e1 != nil || e2 != nil {
					t.Fatal(e1, e2)
				}
			} else {
				close(h.hold)
				if _, err := s.Transact(ctx, del("k")); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Transact(ctx, recreate("k")); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Update(etagstore.WithFence(ctx, 3), "k", func(c *counter) error { c.N++; return nil })
			t.Logf("batched=%v: fenced(3) Update after delete+re-create = %v", batched, err)
			if batched && err != nil {
				t.Errorf("batched: %v; serially the re-created document carries no token", err)
			}
		})
	}
}
