package etagstore_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/etagstore/etagstore"
)

// A hot key across three processes (Stores over one laggy memstore, 10 ms
// a request) taking turns, with a mix of writers: grouped Updates,
// ungrouped ones (DisableGroupCommit) and Saves from a Doc. No update is
// lost, the turns' marks never reach the value, and every Store commits.
func TestHotKeyTurnsMixedWriters(t *testing.T) {
	for _, tc := range []struct{ nogroup, saves bool }{{false, true}, {true, true}, {true, false}} {
		synctest.Test(t, func(t *testing.T) {
			defer runOutTimers()
			o := &etagstore.Options{DisableGroupCommit: tc.nogroup}
			commits, _ := hotKeyProcesses(t, 3, 4, 6*time.Second, o, func(s *etagstore.Store[counter], w int) error {
				ctx := t.Context()
				if w > 0 || !tc.saves {
					_, err := s.Update(ctx, "hot", func(c *counter) error { c.N++; return nil })
					return err
				}
				d, err := s.Get(ctx, "hot")
				if err != nil {
					return err
				}
				_, err = s.Save(ctx, d, counter{N: d.Value.N + 1}, func(base, mine, theirs counter) (counter, error) { return counter{N: theirs.N + 1}, nil })
				return err
			})
			for p, n := range commits {
				if n == 0 {
					t.Errorf("nogroup=%v saves=%v: Store %d committed nothing in 6 s: %v", tc.nogroup, tc.saves, p, commits)
				}
			}
		})
	}
}
