package etagstore_test

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// Two Stores of different types over one backend that declare a unique
// index of the same name share its values, "whatever their types"
// (docs/indexes.md, Scope): a value one Store's document holds refuses
// the other Store's write. The holder's document must be judged by the
// index function of the Store that wrote it, not by the taker's: the
// taker's type may not even have the field.

type namedBoard struct{ Name string }

func sharedTitleStores(t *testing.T) (*etagstore.Store[titled], *etagstore.Store[namedBoard], etagstore.Index[namedBoard]) {
	b := memstore.New(nil)
	cards := etagstore.New(b, nil, etagstore.Unique("title", func(c titled) string { return c.Title }))
	byName := etagstore.Unique("title", func(n namedBoard) string { return n.Name })
	boards := etagstore.New(b, nil, byName)
	return cards, boards, byName
}

func TestUniqueSharedNameAcrossTypesCreate(t *testing.T) {
	ctx := t.Context()
	cards, boards, byName := sharedTitleStores(t)
	if _, err := boards.Create(ctx, "b1", namedBoard{"x"}); err != nil {
		t.Fatal(err)
	}
	_, err := cards.Create(ctx, "c1", titled{"x"})
	var ue *etagstore.UniqueError
	if !errors.As(err, &ue) || ue.Key != "b1" {
		t.Errorf("a card taking the title a board holds = %v; want a UniqueError naming b1", err)
	}
	if d, err := boards.GetBy(ctx, byName, "x"); err != nil || d.Key != "b1" {
		t.Errorf("GetBy of the board's title = %+v, %v; want b1 (its entry written over)", d, err)
	}
}

func TestUniqueSharedNameAcrossTypesTransact(t *testing.T) {
	ctx := t.Context()
	cards, boards, byName := sharedTitleStores(t)
	if _, err := boards.Create(ctx, "b1", namedBoard{"x"}); err != nil {
		t.Fatal(err)
	}
	err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if _, err := boards.In(tx).Get("b1"); err != nil { // the board read, not written
			return err
		}
		return cards.In(tx).Create("c1", titled{"x"})
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Errorf("a transaction whose card takes the title a board holds = %v; want ErrExists", err)
	}
	if d, err := boards.GetBy(ctx, byName, "x"); err != nil || d.Key != "b1" {
		t.Errorf("GetBy of the board's title = %+v, %v; want b1", d, err)
	}
}

// A value one Store's document frees and another Store's (of another
// type, same index name) takes in one transaction is handed over.
func TestUniqueSharedNameAcrossTypesHandOver(t *testing.T) {
	ctx := t.Context()
	cards, boards, byName := sharedTitleStores(t)
	if _, err := boards.Create(ctx, "b1", namedBoard{"x"}); err != nil {
		t.Fatal(err)
	}
	for _, boardFirst := range []bool{true, false} {
		from, to := "x", "y"
		if !boardFirst {
			from, to = "y", "x"
		}
		err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			rename := func() error {
				b, err := boards.In(tx).Get("b1")
				if err != nil {
					return err
				}
				b.Name = to
				return boards.In(tx).Put("b1", b)
			}
			take := func() error { return cards.In(tx).Put("c1", titled{from}) }
			if boardFirst {
				if err := rename(); err != nil {
					return err
				}
				return take()
			}
			if err := take(); err != nil {
				return err
			}
			return rename()
		})
		if err != nil {
			t.Fatalf("board first %v: the hand-over: %v", boardFirst, err)
		}
		if d, err := boards.GetBy(ctx, byName, to); err != nil || d.Key != "b1" {
			t.Errorf("board first %v: the board's new title: %+v, %v", boardFirst, d, err)
		}
		if _, err := boards.GetBy(ctx, byName, from); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("board first %v: the board's old title through the boards: %v, want ErrNotFound (a card holds it)", boardFirst, err)
		}
	}
}
