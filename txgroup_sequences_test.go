package etagstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// Batches of transactions: writes of one key by members in sequence
// (delete then create, Upsert then Put) store what they store serially.

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

func upsert(k string, n int) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error { return tx.Upsert(k, counter{n}) }
}

func readOnly(k string) func(tx *etagstore.Tx[counter]) error {
	return func(tx *etagstore.Tx[counter]) error { _, err := tx.Get(k); return err }
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

// A document written under fencing token 5 is deleted by A and created
// again by B in one batch, as serially: B's document is new and carries no
// token, so a writer fenced with 3 (a lock of the new document's own) is
// not refused.
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

// B's blind Upsert writes T alone on its own, and after A's transaction
// serially; in one batch behind A, which read k (or read and wrote it),
// it does too: "x", a member T does not know, goes.
func TestTxBatchUpsertAfterEarlierMemberRead(t *testing.T) {
	for name, first := range map[string]func(tx *etagstore.Tx[counter]) error{"read": readOnly("k"), "increment": increment("k")} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Serially: T alone.
				h := newHeldCommitsOpen()
				seedUnknown(t, h, "k")
				s := etagstore.New[counter](h, nil)
				if _, err := s.Transact(t.Context(), first); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Transact(t.Context(), upsert("k", 9)); err != nil {
					t.Fatal(err)
				}
				serial := storedRaw(t, h, "k")
				// In one batch.
				h = newHeldCommits()
				seedUnknown(t, h, "k")
				s = etagstore.New[counter](h, nil)
				e1, e2 := twoInOneBatch(t, h, s, first, upsert("k", 9))
				if e1 != nil || e2 != nil {
					t.Fatal(e1, e2)
				}
				batched := storedRaw(t, h, "k")
				t.Logf("serial %s, batched %s", serial, batched)
				if batched != serial {
					t.Errorf("Upsert behind a %s of k: batched %s, serially %s", name, batched, serial)
				}
			})
		})
	}
}
