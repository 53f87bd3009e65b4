package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
)

// testFenceAfterDelete: a fenced Delete keeps the key's fencing token once
// the document is gone (the backend's tombstone; see
// driver.ModeTombstone): a stale holder's fenced Create, or Update with
// CreateIfMissing, or transaction, carrying a lower token is refused with
// ErrFenced and writes nothing, while the key reads as missing to every
// other call. The token, or a higher one, creates it again, and an
// unfenced create forgets the token, as unfenced writes do.
func testFenceAfterDelete(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	if _, err := s.Create(at(5), "p", Page{Title: "a's"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(at(7), "p", etagstore.ETagAny); err != nil {
		t.Fatalf("the newer holder's Delete: %v", err)
	}
	if !s.Backend().Abilities().Tombstones {
		// A backend that keeps no tokens of deleted keys: the token goes
		// with the document, as its Abilities say.
		if _, err := s.Create(at(5), "p", Page{Title: "a's"}); err != nil {
			t.Errorf("Create after a fenced Delete, on a backend without tombstones = %v, want nil", err)
		}
		return
	}

	stale := map[string]error{}
	_, stale["Create"] = s.Create(at(5), "p", Page{Title: "resurrected"})
	_, stale["Update(CreateIfMissing)"] = s.Update(at(6), "p", func(p *Page) error { p.Title = "resurrected"; return nil }, etagstore.CreateIfMissing())
	if s.Backend().Abilities().Commit != nil {
		_, stale["Transact"] = s.Transact(at(6), func(tx *etagstore.Tx[Page]) error {
			return tx.Put("p", Page{Title: "resurrected"})
		})
	}
	for op, err := range stale {
		if !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("a stale holder's %s after the newer holder's Delete = %v, want ErrFenced", op, err)
			continue
		}
		wantOneSentinel(t, err)
	}
	wantMissing(t, s, "p")

	// To every other call the key is missing.
	if _, err := s.Replace(ctx, etagstore.Doc[Page]{Key: "p", ETag: etagstore.ETagAny, Value: Page{Title: "r"}}); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Replace(ETagAny) of the deleted key = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "p", etagstore.ETagAny); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Delete(ETagAny) of the deleted key = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx, "p", func(*Page) error { return nil }); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Update of the deleted key = %v, want ErrNotFound", err)
	}
	for d, err := range s.List(ctx, "") {
		t.Errorf("List after the fenced Delete yields %q, %v", d.Key, err)
	}
	if p, err := s.Page(ctx, "", 10, ""); err != nil || len(p.Docs) != 0 {
		t.Errorf("Page after the fenced Delete = %d documents, %v; want none", len(p.Docs), err)
	}

	// A fenced transaction's delete keeps the token too.
	if s.Backend().Abilities().Commit != nil {
		if _, err := s.Create(at(7), "t", Page{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Transact(at(8), func(tx *etagstore.Tx[Page]) error { return tx.Delete("t") }); err != nil {
			t.Fatalf("fenced transaction deleting: %v", err)
		}
		if _, err := s.Create(at(7), "t", Page{}); !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("Create with 7 after a transaction deleted under 8 = %v, want ErrFenced", err)
		}
	}

	// The token itself creates the key again, and the document records it.
	if _, err := s.Create(at(7), "p", Page{Title: "b's"}); err != nil {
		t.Fatalf("Create with the token of the Delete: %v", err)
	}
	if _, err := s.Update(at(6), "p", func(p *Page) error { p.N++; return nil }); !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("Update with token 6 after the create with 7 = %v, want ErrFenced", err)
	}
	got, err := s.Get(ctx, "p")
	if err != nil || got.Value.Title != "b's" {
		t.Fatalf("after the create with the token: %+v, %v", got.Value, err)
	}

	// An unfenced create forgets the token kept, as unfenced writes do.
	if err := s.Delete(at(9), "p", got.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Upsert(ctx, "p", Page{Title: "unfenced"}); err != nil {
		t.Fatalf("unfenced Upsert after the fenced Delete: %v", err)
	}
	if _, err := s.Update(at(1), "p", func(p *Page) error { p.N++; return nil }); err != nil {
		t.Errorf("Update with token 1 after an unfenced Upsert started a new history: %v", err)
	}
}

// testFenceAfterDeleteRacing: stale holders (token 5) create the key over
// and over while a newer holder (token 7) deletes it; once the newer
// holder's Delete has returned, no stale Create started after it
// succeeds, and the key ends missing or created under 7.
func testFenceAfterDeleteRacing(t *testing.T, s *etagstore.Store[Page]) {
	if !s.Backend().Abilities().Tombstones {
		return // the token goes with the document (testFenceAfterDelete checks that)
	}
	ctx := t.Context()
	stale, newer := etagstore.WithFence(ctx, 5), etagstore.WithFence(ctx, 7)
	var deleted atomic.Bool // set once a newer Delete returned nil
	created := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var late atomic.Int64 // stale creates that succeeded after the newer Delete returned
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				after := deleted.Load()
				_, err := s.Create(stale, "race", Page{Title: "stale"})
				switch {
				case err == nil && after:
					late.Add(1)
				case err == nil:
					once.Do(func() { close(created) })
				case !errors.Is(err, etagstore.ErrExists) && !errors.Is(err, etagstore.ErrFenced):
					t.Errorf("stale Create: %v", err)
					return
				}
			}
		})
	}
	<-created // the stale holders' document exists: the newer holder deletes it
	for !deleted.Load() {
		err := s.Delete(newer, "race", etagstore.ETagAny)
		switch {
		case err == nil:
			deleted.Store(true)
		case !errors.Is(err, etagstore.ErrNotFound) && !errors.Is(err, etagstore.ErrConflict):
			t.Fatalf("newer Delete: %v", err)
		}
	}
	// Let every stale holder try at least once more, after the Delete.
	for range 8 {
		if _, err := s.Create(stale, "race", Page{Title: "stale"}); err == nil {
			late.Add(1)
		} else if !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("stale Create after the newer Delete = %v, want ErrFenced", err)
		}
	}
	close(stop)
	wg.Wait()
	if n := late.Load(); n > 0 {
		t.Errorf("%d stale Create(s) succeeded after the newer holder's Delete returned", n)
	}
	wantMissing(t, s, "race")
}
