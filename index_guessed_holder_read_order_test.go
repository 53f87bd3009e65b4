package etagstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// readsApart is memstore whose ReadMany reads its keys one at a time, the
// documents' before the entries' (as driver.Abilities.ReadMany permits:
// tablestore's queries of more than 14 keys, or of several partitions,
// go in parallel and read at different instants), and runs between, once
// armed, after reading the document between.
type readsApart struct {
	*memstore.Backend
	armed   atomic.Bool
	between func()
}

func (b *readsApart) Abilities() driver.Abilities {
	a := b.Backend.Abilities()
	many := a.ReadMany
	a.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
		out := make([]driver.Item, len(keys))
		order := make([]int, 0, len(keys))
		for i, k := range keys { // documents first
			if !strings.HasPrefix(k, "\uFFFF") {
				order = append(order, i)
			}
		}
		for i, k := range keys {
			if strings.HasPrefix(k, "\uFFFF") {
				order = append(order, i)
			}
		}
		for _, i := range order {
			items, err := many(ctx, keys[i:i+1])
			if err != nil {
				return nil, err
			}
			out[i] = items[0]
			if keys[i] == "h1" && slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "\uFFFF") }) && b.armed.CompareAndSwap(true, false) {
				b.between()
			}
		}
		return out, nil
	}
	return a
}

// precheck reads the document it guesses holds a value (the one the
// Store's own write of the entry named) in the same ReadMany as the
// entry, and a ReadMany may read its keys at different instants
// (tablestore: parallel queries). Here the document is read before
// another process's atomic write gives it the value, and the entry after:
// the entry names h1, and h1 as first read does not hold the value. That
// read must not judge the entry stale (it would be written over on its
// ETag, which still matches, and two documents would hold one value): a
// guessed read showing the value free is read again after the entry, and
// h1 is found holding it.
func TestUniqueGuessedHolderReadBeforeItsEntry(t *testing.T) {
	ctx := t.Context()
	b := &readsApart{Backend: memstore.New(nil)}
	byTitle := etagstore.Unique("title", func(c titled) string { return c.Title })
	cards := etagstore.New(b, nil, byTitle)
	other := etagstore.New(b, nil, byTitle)                         // another process
	if _, err := cards.Create(ctx, "h1", titled{"v"}); err != nil { // cards' recent: v's entry names h1
		t.Fatal(err)
	}
	if _, err := other.Update(ctx, "h1", func(c *titled) error { c.Title = "w"; return nil }); err != nil {
		t.Fatal(err)
	}
	b.between = func() { // h1 takes v again, after the ReadMany read h1 and before it reads v's entry
		if _, err := other.Update(ctx, "h1", func(c *titled) error { c.Title = "v"; return nil }); err != nil {
			t.Error(err)
		}
	}
	b.armed.Store(true)
	_, err := cards.Create(ctx, "c1", titled{"v"})
	if b.armed.Load() {
		t.Fatal("the ReadMany of the entry and h1 together never ran")
	}
	h1, err1 := cards.Get(ctx, "h1")
	c1, err2 := cards.Get(ctx, "c1")
	var ue *etagstore.UniqueError
	if err1 == nil && err2 == nil && h1.Value.Title == "v" && c1.Value.Title == "v" {
		t.Errorf("h1 and c1 both hold the unique title v (Create of c1 = %v)", err)
	} else if !errors.As(err, &ue) || ue.Key != "h1" {
		t.Errorf("Create of c1 = %v; want a UniqueError naming h1", err)
	}
	if d, err := cards.GetBy(ctx, byTitle, "v"); err == nil {
		t.Logf("GetBy v = %s", d.Key)
	}
}
