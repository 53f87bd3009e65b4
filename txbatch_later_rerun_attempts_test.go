package etagstore_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/etagstore/etagstore"
)

// A member whose fn failed on an earlier member's write waits for the
// next batch; when the batch's slots run again within the same attempt
// (another member left: its created key most likely taken), it gets a
// slot again. Its runs count toward its lead's MaxAttempts once per batch
// attempt, as the other members' do, not once per slot: the slots run
// again in one attempt are one run.

func TestTxBatchLaterMemberRerunCountsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeldCommits()
		s := etagstore.New[counter](h, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 2}})
		ctx := t.Context()
		if _, err := s.Create(ctx, "k", counter{1}); err != nil { // in s's cache: most likely taken
			t.Fatal(err)
		}
		createZ := func(tx *etagstore.Tx[counter]) error { return tx.Create("z", counter{1}) }
		createK := func(tx *etagstore.Tx[counter]) error { return tx.Create("k", counter{1}) }
		var wg sync.WaitGroup
		var ea, eb, ec error
		holding(t, s, &wg)
		wg.Go(func() { _, ea = s.Transact(ctx, createZ) }) // commits z
		synctest.Wait()
		wg.Go(func() { _, eb = s.Transact(ctx, createK) }) // k most likely taken: leaves the batch
		synctest.Wait()
		wg.Go(func() { _, ec = s.Transact(ctx, createZ) }) // on the first's pending z: the next batch
		synctest.Wait()
		close(h.hold)
		wg.Wait()
		if ea != nil {
			t.Errorf("the first create of z: %v", ea)
		}
		wantOnly(t, "the create of k, which exists", eb, etagstore.ErrExists)
		wantOnly(t, "the second create of z, after the first's commit", ec, etagstore.ErrExists)
	})
}
