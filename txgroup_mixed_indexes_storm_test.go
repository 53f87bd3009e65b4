package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

// 64 goroutines run transactions that mix Stores with different indexes
// (two Stores of cards with a unique title and two lookups, each with
// its cache, as two processes; a Store of counters without indexes),
// led now by one, now by another, through group commit: creates of
// cards unread (keys and titles that collide, some the Store's cache
// holds), renames, swaps, deletes, each with a counter incremented in
// the same transaction. Afterwards every card's entries are exactly
// its values, no title is held twice, and each goroutine's counter is
// the number of its transactions that reported success: exactly once.
func TestTxGroupMixedIndexesStorm(t *testing.T) {
	runMixedIndexesStorm(t, memstore.New(nil), func(k string) string { return k }, 64, 60)
}

func runMixedIndexesStorm(t *testing.T, b driver.Backend, key func(string) string, goroutines, ops int) {
	ctx := t.Context()
	cardsA := storetest.NewIdxCards(b, nil)
	cardsB := storetest.NewIdxCards(b, nil)
	counts := etagstore.New[counter](b, nil)
	const cards, titles = 24, 10
	var wg sync.WaitGroup
	okCount := make([]int, goroutines)
	var mu sync.Mutex
	tally := map[string]int{}
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(7, uint64(g)))
			mine := key(fmt.Sprintf("n-g%02d", g))
			<-start
			for range ops {
				cs := cardsA
				if rng.IntN(2) == 1 {
					cs = cardsB
				}
				k1 := key(fmt.Sprintf("c%02d", rng.IntN(cards)))
				k2 := key(fmt.Sprintf("c%02d", rng.IntN(cards)))
				title := fmt.Sprintf("t%d", rng.IntN(titles))
				label := fmt.Sprintf("l%d,l%d", rng.IntN(3), rng.IntN(3))
				countFirst := rng.IntN(2) == 0
				op := rng.IntN(5)
				bump := func(tx *etagstore.Txn) error {
					c, err := counts.In(tx).Get(mine)
					if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
						return err
					}
					c.N++
					return counts.In(tx).Put(mine, c)
				}
				var name string
				card := func(tx *etagstore.Txn) error {
					ct := cs.In(tx)
					switch op {
					case 0:
						name = "create"
						return ct.Create(k1, storetest.IdxCard{Title: title, Tag: "g", Labels: label})
					case 1:
						name = "rename"
						c, err := ct.Get(k1)
						if err != nil {
							return err
						}
						c.Title, c.Labels = title, label
						return ct.Put(k1, c)
					case 2:
						name = "swap"
						if k1 == k2 {
							return nil
						}
						a, err := ct.Get(k1)
						if err != nil {
							return err
						}
						b, err := ct.Get(k2)
						if err != nil {
							return err
						}
						a.Title, b.Title = b.Title, a.Title
						if err := ct.Put(k1, a); err != nil {
							return err
						}
						return ct.Put(k2, b)
					case 3:
						name = "delete"
						return ct.Delete(k1)
					default:
						name = "put"
						return ct.Put(k1, storetest.IdxCard{Title: title, Tag: "h", Labels: label})
					}
				}
				err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
					if countFirst {
						if err := bump(tx); err != nil {
							return err
						}
						return card(tx)
					}
					if err := card(tx); err != nil {
						return err
					}
					return bump(tx)
				})
				class := "ok"
				var ue *etagstore.UniqueError
				switch {
				case err == nil:
					okCount[g]++
				case errors.As(err, &ue):
					class = "unique"
					if ue.Key == ue.By {
						t.Errorf("%s %s: a UniqueError naming its own key: %v", name, k1, err)
					}
				case errors.Is(err, etagstore.ErrExists):
					class = "exists"
				case errors.Is(err, etagstore.ErrNotFound):
					class = "notfound"
				case errors.Is(err, etagstore.ErrConflict):
					class = "conflict"
				default:
					class = "other"
					t.Errorf("%s %s: %v", name, k1, err)
				}
				mu.Lock()
				tally[name+" "+class]++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("outcomes: %v", tally)
	problems, err := storetest.IdxCardProblems(ctx, storetest.NewIdxCards(b, nil), "", key("c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for g := range goroutines {
		d, err := etagstore.New[counter](b, nil).Get(context.Background(), key(fmt.Sprintf("n-g%02d", g)))
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			t.Fatal(err)
		}
		if d.Value.N != okCount[g] {
			t.Errorf("goroutine %d: its counter is %d, but %d of its transactions reported success", g, d.Value.N, okCount[g])
		}
	}
}
