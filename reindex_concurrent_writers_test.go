package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// TestReindexWhileDeclaringWritersWrite: 12 writers that declare the
// index create, rename and delete cards for as long as a Reindex of
// 3,000 cards (4 pages) runs, moving titles between documents of
// different pages: writer w owns the keys k(w), k(w+12), … and the
// titles they start with, renames a card to a title it has freed (or to
// none), deletes, and creates again, so that no two cards ever hold one
// title and each writer knows what it wrote. A write refused as taking a
// held title is counted and left (during the pass, an entry the pass made
// from a card's old version names it until the recheck deletes it, and a
// card holding no title is taken as keeping the entry's: see
// docs/indexes.md). At the end Reindex has returned nil, reporting no
// duplicate, and the entries are exactly the cards' titles: none missing,
// none stale or naming a card that is gone. (Without the recheck of each
// page, 191 to 337 stale entries; without a writer's check of an entry it
// learnt missing, once landed, 0 or 1 in about 1 run of 5.)
func TestReindexWhileDeclaringWritersWrite(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	const n, writers = 3000, 12
	seedCards(t, mem, n)
	cards := etagstore.New(mem, nil, byTitle)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var landed [3]int           // updates, deletes, creates
	refusals := 0               // writes refused as taking a held title
	want := map[string]string{} // the writers' cards: title to key
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			titles := map[string]string{} // key to title ("": none, or gone)
			gone := map[string]bool{}
			var free []string // titles this writer freed
			refused := 0
			for i := w; i < n; i += writers {
				k := fmt.Sprintf("k%04d", i)
				titles[k] = fmt.Sprint("t", i)
			}
			keys := slices.Sorted(maps.Keys(titles))
			take := func() string { // a title this writer freed, or none
				if len(free) == 0 || r.IntN(6) == 0 {
					return ""
				}
				i := r.IntN(len(free))
				t := free[i]
				free = slices.Delete(free, i, i+1)
				return t
			}
			for {
				select {
				case <-stop:
					mu.Lock()
					refusals += refused
					for k, v := range titles {
						if v != "" && !gone[k] {
							want[v] = k
						}
					}
					mu.Unlock()
					return
				default:
				}
				k := keys[r.IntN(len(keys))]
				old := titles[k]
				var err error
				op := r.IntN(3)
				switch {
				case gone[k]:
					op = 2
					title := take()
					if _, err = cards.Create(ctx, k, card{Title: title}); err == nil {
						titles[k], gone[k] = title, false
					} else {
						free = append(free, title)
					}
				case op == 0:
					title := take()
					if _, err = cards.Update(ctx, k, func(c *card) error { c.Title = title; return nil }); err == nil {
						titles[k] = title
						free = append(free, old)
					} else {
						free = append(free, title)
					}
				default:
					op = 1
					var d etagstore.Doc[card]
					if d, err = cards.Get(ctx, k); err == nil {
						err = cards.Delete(ctx, k, d.ETag)
					}
					if err == nil {
						titles[k], gone[k] = "", true
						free = append(free, old)
					}
				}
				free = slices.DeleteFunc(free, func(t string) bool { return t == "" })
				if errors.Is(err, etagstore.ErrExists) {
					refused++
					continue
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				landed[op]++
				mu.Unlock()
			}
		})
	}
	err := cards.Reindex(ctx, byTitle)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	t.Logf("writes landed during the pass (updates, deletes, creates): %v; refused: %d", landed, refusals)
	if landed[0] == 0 || landed[1] == 0 || landed[2] == 0 {
		t.Errorf("writes landed %v: every kind must land during the pass", landed)
	}
	wantTitleEntries(t, mem, want)
	for d, err := range cards.List(ctx, "") { // the writers' model against the store
		if err != nil {
			t.Fatal(err)
		}
		if d.Value.Title != "" && want[d.Value.Title] != d.Key {
			t.Errorf("%q holds %q, which its writer did not write", d.Key, d.Value.Title)
		}
	}
}
