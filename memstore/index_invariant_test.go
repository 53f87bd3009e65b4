package memstore_test

import (
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

// 64 goroutines create, rename, relabel, delete and swap cards with
// colliding unique titles through Stores of different options over one
// memstore (run with -race). At the end no two cards hold one title,
// every card has exactly its entries, and no entry lacks its card.
func TestIndexInvariantUnderRaces(t *testing.T) {
	b := memstore.New(nil)
	var stores []*etagstore.Store[storetest.IdxCard]
	for _, o := range storetest.StormStoreOptions() {
		stores = append(stores, storetest.NewIdxCards(b, o))
	}
	storm := storetest.IndexStorm{
		Goroutines: 64, Ops: 60, Boards: []string{"b1", "b2"}, Cards: 16, Titles: 12, Seed: 44,
		Key: func(board, card string) string { return board + "/" + card },
	}
	tally := storm.Run(t, stores)
	t.Logf("outcomes: %v", tally)
	// A relabel keeps its title: a *UniqueError is one it shared with a
	// rename in a group-commit batch (see TestIndexGroupUpdateMemberFailsAlone).
	if n := tally.Count("relabel", "unique"); n > 0 {
		t.Logf("%d relabels failed with a *UniqueError of a title they did not change", n)
	}
	problems, err := storetest.IdxCardProblems(t.Context(), storetest.NewIdxCards(b, nil), "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
