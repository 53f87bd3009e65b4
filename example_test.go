package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

type Account struct {
	Owner   string
	Balance int64
}

func ExampleStore_Update() {
	ctx := context.Background()
	accounts := etagstore.New[Account](memstore.New(nil), nil)
	if _, err := accounts.Create(ctx, "alice", Account{Owner: "Alice", Balance: 100}); err != nil {
		panic(err)
	}

	// Update reads, applies the mutation and writes with If-Match; if another
	// writer got in between, it re-reads and applies the mutation again.
	d, err := accounts.Update(ctx, "alice", func(a *Account) error {
		if a.Balance < 30 {
			return errors.New("insufficient funds") // aborts: nothing is written
		}
		a.Balance -= 30
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Value.Owner, d.Value.Balance)

	got, _ := accounts.Get(ctx, "alice")
	fmt.Println("same version:", got.ETag == d.ETag)
	// Output:
	// Alice 70
	// same version: true
}

func ExampleConflictError() {
	ctx := context.Background()
	accounts := etagstore.New[Account](memstore.New(nil), nil)
	mine, _ := accounts.Create(ctx, "bob", Account{Owner: "Bob", Balance: 10})

	// Someone else changes the document after we read it.
	_, _ = accounts.Update(ctx, "bob", func(a *Account) error { a.Balance = 500; return nil })

	mine.Value.Balance = 20
	_, err := accounts.Replace(ctx, mine) // If-Match of a stale ETag: HTTP 412
	var conflict *etagstore.ConflictError[Account]
	if errors.As(err, &conflict) {
		fmt.Println("conflict:", errors.Is(err, etagstore.ErrConflict))
		fmt.Println("stored balance:", conflict.Theirs.Value.Balance)
		fmt.Println("my balance:", conflict.Mine.Balance)
		// Diff is for people (go-cmp's format, which varies its spacing).
		fmt.Println("diff names Balance:", strings.Contains(conflict.Diff(), "Balance: 500"))
	}
	// Output:
	// conflict: true
	// stored balance: 500
	// my balance: 20
	// diff names Balance: true
}

func ExampleETagAny() {
	ctx := context.Background()
	accounts := etagstore.New[Account](memstore.New(nil), nil)
	_, _ = accounts.Create(ctx, "carol", Account{Owner: "Carol", Balance: 1})

	// Without an ETag nothing is sent: overwriting has to be asked for.
	_, err := accounts.Replace(ctx, etagstore.Doc[Account]{Key: "carol", Value: Account{Owner: "Carol"}})
	fmt.Println(errors.Is(err, etagstore.ErrETagRequired))

	// ETagAny is the explicit last-writer-wins opt-out.
	d, err := accounts.Replace(ctx, etagstore.Doc[Account]{Key: "carol", Value: Account{Owner: "Carol", Balance: 99}, ETag: etagstore.ETagAny})
	fmt.Println(d.Value.Balance, err)
	// Output:
	// true
	// 99 <nil>
}

func ExampleStore_Upsert() {
	ctx := context.Background()
	accounts := etagstore.New[Account](memstore.New(nil), nil)
	// Upsert is insert-or-replace: no concurrency check at all.
	_, _ = accounts.Upsert(ctx, "dave", Account{Owner: "Dave", Balance: 5})
	d, _ := accounts.Upsert(ctx, "dave", Account{Owner: "Dave", Balance: 6})
	fmt.Println(d.Value.Balance)
	// Output: 6
}

func ExampleStore_Save() {
	type Page struct {
		Title string
		Body  string
	}
	ctx := context.Background()
	wiki := etagstore.New[Page](memstore.New(nil), nil)
	base, _ := wiki.Create(ctx, "home", Page{Title: "Home", Body: "Welcome"})

	// Another editor renames the page while we edit the body.
	_, _ = wiki.Update(ctx, "home", func(p *Page) error { p.Title = "Start"; return nil })

	edited := base.Value
	edited.Body = "Welcome, everyone"
	saved, err := wiki.Save(ctx, base, edited, nil) // nil: etagstore.MergeFields
	fmt.Printf("%+v %v\n", saved.Value, err)

	// Both change the body: nothing is written and the error holds all three.
	other := saved.Value
	other.Body = "Hello"
	_, _ = wiki.Update(ctx, "home", func(p *Page) error { p.Body = "Hi there"; return nil })
	_, err = wiki.Save(ctx, saved, other, nil)
	var conflict *etagstore.ConflictError[Page]
	if errors.As(err, &conflict) {
		fmt.Println(conflict.Fields, "base:", conflict.Base.Body, "mine:", conflict.Mine.Body, "theirs:", conflict.Theirs.Value.Body)
	}
	// Output:
	// {Title:Start Body:Welcome, everyone} <nil>
	// [Body] base: Welcome, everyone mine: Hello theirs: Hi there
}

// Cards and boards are two document types in one backend: moving a card
// changes the card and both boards' counts in one atomic commit.
func ExampleTransact() {
	type Card struct{ Board string }
	type Board struct{ Cards int }
	ctx := context.Background()
	backend := memstore.New(nil)
	cards := etagstore.New[Card](backend, nil)
	boards := etagstore.New[Board](backend, nil)
	_, _ = boards.Create(ctx, "todo", Board{Cards: 1})
	_, _ = boards.Create(ctx, "done", Board{})
	_, _ = cards.Create(ctx, "c1", Card{Board: "todo"})

	err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		c, err := cards.In(tx).Get("c1")
		if err != nil {
			return err
		}
		from, err := boards.In(tx).Get(c.Board)
		if err != nil {
			return err
		}
		to, err := boards.In(tx).Get("done")
		if err != nil {
			return err
		}
		from.Cards, to.Cards = from.Cards-1, to.Cards+1
		if err := boards.In(tx).Put(c.Board, from); err != nil {
			return err
		}
		c.Board = "done"
		return errors.Join(boards.In(tx).Put("done", to), cards.In(tx).Put("c1", c))
	})
	todo, _ := boards.Get(ctx, "todo")
	done, _ := boards.Get(ctx, "done")
	fmt.Println(err, todo.Value.Cards, done.Value.Cards)
	// Output: <nil> 0 1
}

// Tx.Create claims a title for a card without reading it: the commit is
// conditioned on the claim's absence, so a taken title fails the whole
// transaction with ErrExists, and nothing of it is written.
func ExampleTx_Create() {
	type Card struct{ Title string }
	type Claim struct{ Card string }
	type Board struct{ Cards int }
	ctx := context.Background()
	backend := memstore.New(nil)
	cards := etagstore.New[Card](backend, nil)
	claims := etagstore.New[Claim](backend, nil)
	boards := etagstore.New[Board](backend, nil)
	_, _ = boards.Create(ctx, "board", Board{})

	create := func(id, title string) error {
		return etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			if err := claims.In(tx).Create("title/"+strings.ToLower(title), Claim{Card: id}); err != nil {
				return err
			}
			if err := cards.In(tx).Create(id, Card{Title: title}); err != nil {
				return err
			}
			b, err := boards.In(tx).Get("board") // read after the claims: a taken title is answered at once
			if err != nil {
				return err
			}
			b.Cards++
			return boards.In(tx).Put("board", b)
		})
	}
	fmt.Println(create("c1", "Ship it"))
	err := create("c2", "ship IT")
	fmt.Println(errors.Is(err, etagstore.ErrExists))
	_, missing := cards.Get(ctx, "c2")
	b, _ := boards.Get(ctx, "board")
	fmt.Println(errors.Is(missing, etagstore.ErrNotFound), b.Value.Cards)
	// Output:
	// <nil>
	// true
	// true 1
}

// A Store declares its indexes once, in New, and every write keeps their
// entries in the same atomic request as the document: a Unique title
// (case-insensitive here) and a Lookup of labels. A duplicate title is a
// *UniqueError, matching ErrExists, and nothing is written.
func ExampleUnique() {
	type Card struct {
		Title  string
		Labels []string
	}
	byTitle := etagstore.Unique("title", func(c Card) string { return strings.ToLower(c.Title) })
	byLabel := etagstore.Lookup("label", func(c Card) []string { return c.Labels })
	ctx := context.Background()
	cards := etagstore.New[Card](memstore.New(nil), nil, byTitle, byLabel)

	_, _ = cards.Create(ctx, "c1", Card{Title: "Ship it", Labels: []string{"urgent"}})
	_, _ = cards.Create(ctx, "c2", Card{Title: "Test it", Labels: []string{"urgent", "qa"}})
	_, err := cards.Create(ctx, "c3", Card{Title: "SHIP IT"})
	var taken *etagstore.UniqueError
	fmt.Println(err)
	fmt.Println(errors.As(err, &taken), taken.Key, errors.Is(err, etagstore.ErrExists))

	d, err := cards.GetBy(ctx, byTitle, "ship it")
	fmt.Println(d.Key, d.Value.Title, err)
	for d, err := range cards.ListBy(ctx, byLabel, "urgent") {
		fmt.Println(d.Key, d.Value.Title, err)
	}
	// Output:
	// etagstore: already exists: index "title": "c1" holds the value "ship it", so "c3" cannot take it
	// true c1 true
	// c1 Ship it <nil>
	// c1 Ship it <nil>
	// c2 Test it <nil>
}
