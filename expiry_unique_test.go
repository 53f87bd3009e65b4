package etagstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// Adversarial: writes over an expired document that holds a unique and a
// lookup value. Each write form documented to replace the expired version
// must release its values, so that another document can take them, and
// reads must never return the expired document.

type account struct {
	Email string
	Tags  []string
	Until time.Time
}

func newAccounts(t *testing.T) (*etagstore.Store[account], etagstore.Index[account], etagstore.Index[account], *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	email := etagstore.Unique("email", func(a account) string { return a.Email })
	tags := etagstore.Lookup("tags", func(a account) []string { return a.Tags })
	s := etagstore.New[account](memstore.New(nil), &etagstore.Options{Clock: clock},
		email, tags, etagstore.Expiry(func(a account) time.Time { return a.Until }))
	return s, email, tags, clock
}

func oneLine(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && strings.ContainsAny(err.Error(), "\r\n") {
		t.Errorf("%s: error on two lines: %q", what, err)
	}
}

func TestExpiryUniqueReleasedByEachReplacingWrite(t *testing.T) {
	forms := map[string]func(ctx context.Context, s *etagstore.Store[account], v account) error{
		"Create": func(ctx context.Context, s *etagstore.Store[account], v account) error {
			_, err := s.Create(ctx, "k1", v)
			return err
		},
		"Upsert": func(ctx context.Context, s *etagstore.Store[account], v account) error {
			_, err := s.Upsert(ctx, "k1", v)
			return err
		},
		"UpdateCreateIfMissing": func(ctx context.Context, s *etagstore.Store[account], v account) error {
			_, err := s.Update(ctx, "k1", func(a *account) error {
				if a.Email != "" {
					t.Errorf("mutate got the expired value %+v, want the zero account", *a)
				}
				*a = v
				return nil
			}, etagstore.CreateIfMissing())
			return err
		},
		"TxCreate": func(ctx context.Context, s *etagstore.Store[account], v account) error {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[account]) error { return tx.Create("k1", v) })
			return err
		},
		"TxGetPut": func(ctx context.Context, s *etagstore.Store[account], v account) error {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[account]) error {
				if _, err := tx.Get("k1"); !errors.Is(err, etagstore.ErrNotFound) {
					t.Errorf("Tx.Get of the expired k1 = %v, want ErrNotFound", err)
				}
				return tx.Put("k1", v)
			})
			return err
		},
		"TxUpsert": func(ctx context.Context, s *etagstore.Store[account], v account) error {
			_, err := s.Transact(ctx, func(tx *etagstore.Tx[account]) error { return tx.Upsert("k1", v) })
			return err
		},
		"TransactCreate": func(ctx context.Context, s *etagstore.Store[account], v account) error {
			return etagstore.Transact(ctx, func(tx *etagstore.Txn) error { return s.In(tx).Create("k1", v) })
		},
	}
	for name, write := range forms {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s, email, tags, clock := newAccounts(t)
			if _, err := s.Create(ctx, "k1", account{Email: "a@x", Tags: []string{"t1"}, Until: clock.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			clock.Sleep(ctx, time.Minute) // k1 has expired
			if _, err := s.GetBy(ctx, email, "a@x"); !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("GetBy of the expired holder = %v, want ErrNotFound", err)
			}
			for d, err := range s.ListBy(ctx, tags, "t1") {
				t.Errorf("ListBy yielded the expired %+v, %v", d, err)
			}
			// The write replaces the expired k1 with another email and tag.
			err := write(ctx, s, account{Email: "b@x", Tags: []string{"t2"}, Until: clock.Now().Add(time.Hour)})
			oneLine(t, name, err)
			if err != nil {
				t.Fatalf("%s over the expired k1: %v", name, err)
			}
			d, err := s.Get(ctx, "k1")
			if err != nil || d.Value.Email != "b@x" {
				t.Fatalf("Get k1 = %+v, %v; want b@x", d.Value, err)
			}
			// a@x is free again: k2 takes it.
			if _, err := s.Create(ctx, "k2", account{Email: "a@x", Until: clock.Now().Add(time.Hour)}); err != nil {
				t.Errorf("Create k2 with the released a@x: %v", err)
			}
			if got, err := s.GetBy(ctx, email, "a@x"); err != nil || got.Key != "k2" {
				t.Errorf("GetBy a@x = %q, %v; want k2", got.Key, err)
			}
			if got, err := s.GetBy(ctx, email, "b@x"); err != nil || got.Key != "k1" {
				t.Errorf("GetBy b@x = %q, %v; want k1", got.Key, err)
			}
			var keys []string
			for d, err := range s.ListBy(ctx, tags, "t2") {
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, d.Key)
			}
			if len(keys) != 1 || keys[0] != "k1" {
				t.Errorf("ListBy t2 = %v, want [k1]", keys)
			}
			// The sweep finds nothing to delete: k1 was refreshed.
			clock.Sleep(ctx, 10*time.Second)
			if n, err := s.Sweep(ctx); err != nil || n != 0 {
				t.Errorf("Sweep = %d, %v; want 0 (k1 replaced, live)", n, err)
			}
			if _, err := s.Get(ctx, "k1"); err != nil {
				t.Errorf("k1 after Sweep: %v", err)
			}
		})
	}
}

// The writes documented to match ErrNotFound over an expired document,
// with the expired version held in the Store's version cache (read just
// before it expired), write nothing.
func TestExpiryCachedVersionExpires(t *testing.T) {
	ctx := t.Context()
	s, email, _, clock := newAccounts(t)
	d, err := s.Create(ctx, "k1", account{Email: "a@x", Until: clock.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k1"); err != nil { // cached
		t.Fatal(err)
	}
	clock.Sleep(ctx, time.Minute)
	check := func(what string, err error) {
		t.Helper()
		oneLine(t, what, err)
		if !errors.Is(err, etagstore.ErrNotFound) || errors.Is(err, etagstore.ErrConflict) || errors.Is(err, etagstore.ErrExists) {
			t.Errorf("%s over the expired k1 = %v, want ErrNotFound alone", what, err)
		}
	}
	_, err = s.Update(ctx, "k1", func(a *account) error {
		t.Errorf("Update's mutate ran on the expired %+v", *a)
		return nil
	})
	check("Update", err)
	edited := d.Value
	edited.Until = clock.Now().Add(time.Hour)
	_, err = s.Save(ctx, d, edited, nil)
	check("Save", err)
	_, err = s.Replace(ctx, etagstore.Doc[account]{Key: "k1", ETag: d.ETag, Value: edited})
	check("Replace", err)
	check("Delete(etag)", s.Delete(ctx, "k1", d.ETag))
	check("Delete(ETagAny)", s.Delete(ctx, "k1", etagstore.ETagAny))
	_, err = s.Get(ctx, "k1")
	check("Get", err)
	// Nothing was written: the sweep deletes k1, and a@x is free.
	clock.Sleep(ctx, 10*time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Errorf("Sweep = %d, %v; want 1", n, err)
	}
	if _, err := s.Create(ctx, "k2", account{Email: "a@x"}); err != nil {
		t.Errorf("Create k2 with a@x after the sweep: %v", err)
	}
	if got, err := s.GetBy(ctx, email, "a@x"); err != nil || got.Key != "k2" {
		t.Errorf("GetBy a@x = %q, %v; want k2", got.Key, err)
	}
}

// A Replace whose ETag is stale, over a current version that has expired,
// gets ErrNotFound rather than a *ConflictError (docs/expiry.md: "a
// *ConflictError — a write that finds the current version expired gets
// ErrNotFound instead").
func TestExpiryConflictOverExpired(t *testing.T) {
	ctx := t.Context()
	s, _, _, clock := newAccounts(t)
	old, err := s.Create(ctx, "k1", account{Email: "a@x", Until: clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "k1", func(a *account) error { a.Until = clock.Now().Add(time.Minute); return nil }); err != nil {
		t.Fatal(err)
	}
	clock.Sleep(ctx, time.Minute)
	_, err = s.Replace(ctx, etagstore.Doc[account]{Key: "k1", ETag: old.ETag, Value: account{Email: "c@x"}})
	oneLine(t, "Replace", err)
	var ce *etagstore.ConflictError[account]
	if !errors.Is(err, etagstore.ErrNotFound) || errors.As(err, &ce) || errors.Is(err, etagstore.ErrConflict) {
		t.Errorf("Replace with a stale ETag over an expired version = %v, want ErrNotFound alone", err)
	}
	err = s.Delete(ctx, "k1", old.ETag)
	oneLine(t, "Delete", err)
	if !errors.Is(err, etagstore.ErrNotFound) || errors.Is(err, etagstore.ErrConflict) {
		t.Errorf("Delete with a stale ETag over an expired version = %v, want ErrNotFound alone", err)
	}
}
