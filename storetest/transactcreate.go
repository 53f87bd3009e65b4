package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
)

// Claim is a title's claim in the kanban case: the card that holds it.
type Claim struct{ Card string }

// testTransactCreate: Tx.Create writes a key that does not exist, reading
// nothing, and a key that exists fails the transaction with ErrExists and
// nothing written; a key the transaction knows is decided at once.
func testTransactCreate(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	if _, err := s.Create(ctx, "taken", Page{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
		if err := tx.Create("new", Page{Title: "new"}); err != nil {
			return err
		}
		if got, err := tx.Get("new"); err != nil || got.Title != "new" {
			t.Errorf("Get after Create = %+v, %v; want its own write", got, err)
		}
		return tx.Put("other", Page{N: 1})
	})
	if err != nil || len(docs) != 2 || docs[0].Key != "new" {
		t.Fatalf("Transact with a Create = %+v, %v", docs, err)
	}
	if d, err := s.Get(ctx, "new"); err != nil || d.ETag != docs[0].ETag || d.Value.Title != "new" {
		t.Errorf("the created document: %+v, %v; Transact returned ETag %q", d, err, docs[0].ETag)
	}

	runs := 0
	_, err = s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
		runs++
		return errors.Join(tx.Put("lost", Page{N: 1}), tx.Create("taken", Page{Title: "second"}))
	})
	if !errors.Is(err, etagstore.ErrExists) || runs != 1 {
		t.Errorf("Create of an existing key = %v after %d runs, want ErrExists after 1", err, runs)
	}
	wantOneSentinel(t, err)
	if _, err := s.Get(ctx, "lost"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("a write beside the refused Create: %v, want nothing written", err)
	}
	if d, _ := s.Get(ctx, "taken"); d.Value.Title != "first" {
		t.Errorf("the existing document became %+v", d.Value)
	}

	_, err = s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
		if _, err := tx.Get("taken"); err != nil {
			return err
		}
		err := tx.Create("taken", Page{})
		if !errors.Is(err, etagstore.ErrExists) {
			t.Errorf("Create of a key read and found = %v, want ErrExists at once", err)
		}
		return err
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Errorf("Transact = %v, want fn's ErrExists", err)
	}
	if _, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
		if err := tx.Create("cancelled", Page{}); err != nil {
			return err
		}
		return tx.Delete("cancelled")
	}); err != nil {
		t.Errorf("Create then Delete: %v", err)
	}
	if _, err := s.Get(ctx, "cancelled"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Create then Delete wrote %v", err)
	}
}

// testTransactCreateKanban: concurrent creates of a card, its title's
// claim (both Tx.Create) and its board's count, over three Stores in one
// etagstore.Transact, with titles that collide: every title is claimed
// once, by a card that exists; the board counts the cards; every refused
// create matches ErrExists alone and wrote nothing.
func testTransactCreateKanban(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	cards := etagstore.New[Card](s.Backend(), nil)
	boards := etagstore.New[Board](s.Backend(), nil)
	claims := etagstore.New[Claim](s.Backend(), nil)
	if _, err := boards.Create(ctx, "board", Board{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	const writers, titles = 12, 8
	var created, taken atomic.Int64
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			card, title := fmt.Sprintf("card-%d", i), fmt.Sprintf("claim-%d", i%titles)
			err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
				if err := claims.In(tx).Create(title, Claim{Card: card}); err != nil {
					return err
				}
				if err := cards.In(tx).Create(card, Card{Title: title, Board: "board"}); err != nil {
					return err
				}
				b, err := boards.In(tx).Get("board")
				if err != nil {
					return err
				}
				b.Count++
				return boards.In(tx).Put("board", b)
			})
			switch {
			case err == nil:
				created.Add(1)
			case errors.Is(err, etagstore.ErrExists):
				wantOneSentinel(t, err)
				taken.Add(1)
			default:
				t.Errorf("create %s: %v", card, err)
			}
		})
	}
	wg.Wait()
	if created.Load() != titles || taken.Load() != writers-titles {
		t.Errorf("%d created, %d refused; want %d and %d", created.Load(), taken.Load(), titles, writers-titles)
	}
	b, err := boards.Get(ctx, "board")
	if err != nil || int64(b.Value.Count) != created.Load() {
		t.Errorf("the board counts %d (%v); %d cards were created", b.Value.Count, err, created.Load())
	}
	for j := range titles {
		c, err := claims.Get(ctx, fmt.Sprintf("claim-%d", j))
		if err != nil {
			t.Errorf("claim-%d: %v", j, err)
			continue
		}
		if card, err := cards.Get(ctx, c.Value.Card); err != nil || card.Value.Title != fmt.Sprintf("claim-%d", j) {
			t.Errorf("claim-%d holds %s: %+v, %v", j, c.Value.Card, card.Value, err)
		}
	}
	n := 0
	for i := range writers {
		if _, err := cards.Get(ctx, fmt.Sprintf("card-%d", i)); err == nil {
			n++
		}
	}
	if int64(n) != created.Load() {
		t.Errorf("%d cards stored, %d creates succeeded", n, created.Load())
	}
}
