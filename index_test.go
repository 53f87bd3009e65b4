package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

type card struct {
	Title  string
	Labels []string
}

var (
	byTitle = etagstore.Unique("title", func(c card) string { return strings.ToLower(c.Title) })
	byLabel = etagstore.Lookup("label", func(c card) []string { return c.Labels })
)

func TestIndexesOnMemstore(t *testing.T) {
	ctx := context.Background()
	cards := etagstore.New(memstore.New(nil), nil, byTitle, byLabel)
	a, err := cards.Create(ctx, "c1", card{Title: "Ship it", Labels: []string{"urgent", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cards.Create(ctx, "c2", card{Title: "ship IT"})
	var ue *etagstore.UniqueError
	if !errors.As(err, &ue) || !errors.Is(err, etagstore.ErrExists) || ue.Key != "c1" || ue.Value != "ship it" {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := cards.Get(ctx, "c2"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("c2 written: %v", err)
	}
	d, err := cards.GetBy(ctx, byTitle, "ship it")
	if err != nil || d.Key != "c1" {
		t.Fatalf("GetBy: %v %v", d.Key, err)
	}
	if _, err := cards.Update(ctx, "c1", func(c *card) error { c.Title = "Shipped"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := cards.GetBy(ctx, byTitle, "ship it"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("old value still held: %v", err)
	}
	if _, err := cards.Create(ctx, "c2", card{Title: "ship it", Labels: []string{"urgent"}}); err != nil {
		t.Fatalf("freed value: %v", err)
	}
	var keys []string
	for d, err := range cards.ListBy(ctx, byLabel, "urgent") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, d.Key)
	}
	if !slices.Equal(keys, []string{"c1", "c2"}) {
		t.Fatalf("ListBy: %v", keys)
	}
	_ = a
	c1, _ := cards.Get(ctx, "c1")
	if err := cards.Delete(ctx, "c1", c1.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := cards.Upsert(ctx, "c3", card{Title: "Shipped"}); err != nil {
		t.Fatalf("value freed by delete: %v", err)
	}
	for it, err := range cards.Backend().List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("listed %q", it.Key)
	}
}

func TestIndexesInTransactions(t *testing.T) {
	ctx := context.Background()
	cards := etagstore.New(memstore.New(nil), nil, byTitle, byLabel)
	_, err := cards.Transact(ctx, func(tx *etagstore.Tx[card]) error {
		if err := tx.Create("c1", card{Title: "a"}); err != nil {
			return err
		}
		return tx.Put("c2", card{Title: "b"})
	})
	if err != nil {
		t.Fatal(err)
	}
	// A swap of two titles in one transaction.
	_, err = cards.Transact(ctx, func(tx *etagstore.Tx[card]) error {
		if err := tx.Put("c1", card{Title: "b"}); err != nil {
			return err
		}
		return tx.Put("c2", card{Title: "a"})
	})
	if err != nil {
		t.Fatalf("swap: %v", err)
	}
	if d, err := cards.GetBy(ctx, byTitle, "a"); err != nil || d.Key != "c2" {
		t.Fatalf("after swap: %v %v", d.Key, err)
	}
	_, err = cards.Transact(ctx, func(tx *etagstore.Tx[card]) error {
		return tx.Create("c3", card{Title: "a"})
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("tx duplicate: %v", err)
	}
	_, err = cards.Transact(ctx, func(tx *etagstore.Tx[card]) error {
		if err := tx.Create("c4", card{Title: "z"}); err != nil {
			return err
		}
		return tx.Create("c5", card{Title: "z"})
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("duplicate within one tx: %v", err)
	}
	_, err = cards.Transact(ctx, func(tx *etagstore.Tx[card]) error {
		return tx.Upsert("c6", card{Title: "q"})
	})
	t.Logf("tx upsert: %v", err)
}

func TestReindexOnMemstore(t *testing.T) {
	ctx := context.Background()
	b := memstore.New(nil)
	plain := etagstore.New[card](b, nil)
	for i, title := range []string{"a", "b", "a", "c"} {
		if _, err := plain.Create(ctx, string(rune('p'+i)), card{Title: title, Labels: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	cards := etagstore.New(b, nil, byTitle, byLabel)
	err := cards.Reindex(ctx, byTitle)
	var re *etagstore.ReindexError
	if !errors.As(err, &re) || len(re.Duplicates) != 1 || re.Duplicates[0].Value != "a" {
		t.Fatalf("Reindex: %v", err)
	}
	t.Log(err)
	if d, err := cards.GetBy(ctx, byTitle, "c"); err != nil || d.Key != "s" {
		t.Fatalf("GetBy after Reindex: %v %v", d.Key, err)
	}
	if err := cards.Reindex(ctx, byLabel); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range cards.ListBy(ctx, byLabel, "x") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("ListBy after Reindex: %d", n)
	}
	// A writer that does not declare the index leaves a stale entry: the
	// next Reindex deletes it.
	if _, err := plain.Update(ctx, "s", func(c *card) error { c.Title = "d"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := cards.GetBy(ctx, byTitle, "c"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("stale entry trusted: %v", err)
	}
	if _, err := cards.Create(ctx, "t", card{Title: "c"}); err != nil {
		t.Fatalf("stale entry blocks a create: %v", err)
	}
	if err := cards.Reindex(ctx, byTitle); !errors.As(err, &re) {
		t.Fatalf("second Reindex: %v", err)
	}
	if d, err := cards.GetBy(ctx, byTitle, "d"); err != nil || d.Key != "s" {
		t.Fatalf("GetBy d: %v %v", d.Key, err)
	}
}

// TestIndexUpdateBatchMemberTakingHeldValue: of Updates of one key
// committed together, the one whose change takes a held value fails
// alone; the others land.
func TestIndexUpdateBatchMemberTakingHeldValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		cards := etagstore.New(memstore.New(nil), nil, byTitle, byLabel)
		if _, err := cards.Create(ctx, "held", card{Title: "taken"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cards.Create(ctx, "c", card{Title: "c"}); err != nil {
			t.Fatal(err)
		}
		entered, release := make(chan struct{}), make(chan struct{})
		first := make(chan error, 1)
		go func() { // the first caller: holds the key while the others queue
			_, err := cards.Update(ctx, "c", func(v *card) error {
				close(entered)
				<-release
				v.Labels = append(v.Labels, "first")
				return nil
			})
			first <- err
		}()
		<-entered
		const n = 6
		errs := make(chan error, n)
		for i := range n {
			go func() {
				_, err := cards.Update(ctx, "c", func(v *card) error {
					if i == 3 {
						v.Title = "TAKEN"
					} else {
						v.Labels = append(v.Labels, fmt.Sprint("l", i))
					}
					return nil
				})
				errs <- err
			}()
		}
		synctest.Wait() // every caller is queued behind the first
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		failed := 0
		for range n {
			err := <-errs
			var ue *etagstore.UniqueError
			switch {
			case errors.As(err, &ue) && ue.Key == "held" && ue.By == "c":
				failed++
			case err != nil:
				t.Fatalf("member: %v", err)
			}
		}
		d, err := cards.Get(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		if failed != 1 || d.Value.Title != "c" || len(d.Value.Labels) != n {
			t.Fatalf("failed %d, document %+v", failed, d.Value)
		}
	})
}

func TestListNeverYieldsEntries(t *testing.T) {
	ctx := context.Background()
	cards := etagstore.New(memstore.New(nil), nil, byTitle)
	if _, err := cards.Create(ctx, "c1", card{Title: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "\uFFFF", "\uFFFFe.", "\uFFFFe.u.title."} {
		for d, err := range cards.List(ctx, prefix) {
			if prefix != "" || err != nil || d.Key != "c1" {
				t.Errorf("List(%q): %q %v", prefix, d.Key, err)
			}
		}
		if p, err := cards.Page(ctx, prefix, 10, ""); err != nil || prefix != "" && len(p.Docs) != 0 {
			t.Errorf("Page(%q): %d docs, %v", prefix, len(p.Docs), err)
		}
	}
}

// GetBy of a value no document holds matches ErrNotFound and names the
// value and the index, never the entry's reserved key.
func TestGetByNotFoundNamesTheValue(t *testing.T) {
	cards := etagstore.New(memstore.New(nil), nil, byTitle)
	_, err := cards.GetBy(context.Background(), byTitle, "nobody")
	if !errors.Is(err, etagstore.ErrNotFound) || !strings.Contains(err.Error(), `"nobody"`) ||
		!strings.Contains(err.Error(), `"title"`) || strings.Contains(err.Error(), "\uffff") || strings.Contains(err.Error(), `\uffff`) {
		t.Errorf("GetBy of an unheld value: %v, want ErrNotFound naming the value and the index", err)
	}
}
