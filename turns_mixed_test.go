package etagstore_test

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// A hot key across three processes (Stores over one laggy memstore, 10 ms
// a request) taking turns, with a mix of writers: grouped Updates,
// ungrouped ones (DisableGroupCommit) and Saves from a Doc. No update is
// lost, the turns' marks never reach the value, and every Store commits.
func TestHotKeyTurnsMixedWriters(t *testing.T) {
	for _, tc := range []struct{ nogroup, saves bool }{{false, true}, {true, true}, {true, false}} {
		nogroup := tc.nogroup
		synctest.Test(t, func(t *testing.T) {
			defer runOutTimers()
			const procs, writers = 3, 4
			mem := memstore.New(nil)
			ctx := t.Context()
			if _, err := etagstore.New[counter](mem, nil).Create(ctx, "hot", counter{}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(6 * time.Second)
			var mu sync.Mutex
			commits := make([]int, procs)
			var longest time.Duration
			var wg sync.WaitGroup
			for p := range procs {
				s := etagstore.New[counter](newLaggy(mem, 10*time.Millisecond), &etagstore.Options{DisableGroupCommit: nogroup})
				for w := range writers {
					wg.Go(func() {
						for time.Now().Before(deadline) {
							began := time.Now()
							var err error
							if w == 0 && tc.saves {
								var d etagstore.Doc[counter]
								d, err = s.Get(ctx, "hot")
								if err == nil {
									edited := counter{N: d.Value.N + 1}
									_, err = s.Save(ctx, d, edited, func(base, mine, theirs counter) (counter, error) { return counter{N: theirs.N + 1}, nil })
								}
							} else {
								_, err = s.Update(ctx, "hot", func(c *counter) error { c.N++; return nil })
							}
							if err != nil {
								t.Errorf("write: %v", err)
								return
							}
							mu.Lock()
							commits[p]++
							longest = max(longest, time.Since(began))
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			d, err := etagstore.New[counter](mem, nil).Get(ctx, "hot")
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, n := range commits {
				total += n
			}
			it, _ := mem.Read(ctx, "hot")
			t.Logf("nogroup=%v saves=%v commits per Store %v (total %d), longest %v, meta %q", nogroup, tc.saves, commits, total, longest, it.Meta)
			if d.Value.N != total {
				t.Fatalf("counter %d after %d commits", d.Value.N, total)
			}
			if strings.Contains(string(it.Data), "y=") {
				t.Errorf("bookkeeping in data: %s", it.Data)
			}
			for p, n := range commits {
				if n == 0 {
					t.Errorf("Store %d committed nothing in 6 s: %v", p, commits)
				}
			}
		})
	}
}
