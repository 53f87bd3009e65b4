package etagstore_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// What the batch tests of several files share: two transactions queued in
// one batch, a held backend already open, and partitions of keys.

// twoInOneBatch runs first then second as two Transacts queued behind a
// held one, so that they go in one batch, in that order.
func twoInOneBatch(t *testing.T, h *heldCommits, s *etagstore.Store[counter], first, second func(tx *etagstore.Tx[counter]) error) (e1, e2 error) {
	var wg sync.WaitGroup
	holding(t, s, &wg)
	wg.Go(func() { _, e1 = s.Transact(t.Context(), first) })
	synctest.Wait()
	wg.Go(func() { _, e2 = s.Transact(t.Context(), second) })
	synctest.Wait()
	close(h.hold)
	wg.Wait()
	return e1, e2
}

func newHeldCommitsOpen() *heldCommits {
	h := newHeldCommits()
	close(h.hold)
	return h
}

// partitioned is memstore whose commits cannot mix key prefixes (the part
// before '/'), as table partitions.
type partitioned struct {
	*heldCommits
}

func prefix(k string) string {
	for i := range len(k) {
		if k[i] == '/' {
			return k[:i]
		}
	}
	return ""
}

func (p partitioned) Abilities() driver.Abilities {
	a := p.heldCommits.Abilities()
	chk := func(actions []driver.Action) error {
		for _, ac := range actions[1:] {
			if prefix(ac.Key) != prefix(actions[0].Key) {
				return etagstore.ErrInvalidInput
			}
		}
		return nil
	}
	commit := a.Commit
	a.CheckCommit = chk
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		if err := chk(actions); err != nil {
			return nil, err
		}
		return commit(ctx, actions)
	}
	return a
}
