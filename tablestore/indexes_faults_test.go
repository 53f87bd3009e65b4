package tablestore_test

// The invariant of unique and lookup indexes on tables under faults: 64
// goroutines create, rename, relabel, delete and swap cards with colliding
// unique titles through Stores of different options, through a proxy that
// loses 10% of the answers after the commit and answers 503 to 5% of the
// requests (reads too). At the end, read past the proxy: no two cards of a
// partition hold one title, every card has exactly its entries, and no
// entry lacks its card.

import (
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// bypass sends requests to the proxy until off is set, then straight to
// Azurite (host), so that the final read sees no fault.
type bypass struct {
	host string
	off  atomic.Bool
}

func (b *bypass) Do(r *http.Request) (*http.Response, error) {
	if b.off.Load() {
		r = r.Clone(r.Context())
		r.URL.Host, r.Host = b.host, ""
	}
	return azuritetest.Transport.Do(r)
}

func TestIndexInvariantUnderFaults(t *testing.T) {
	ops := 16
	if os.Getenv("ETAGSTORE_INDEX_SOAK") != "" { // opt-in: a longer storm
		ops = 80
	}
	target := azuritetest.Host(t, "Table")
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := storetest.StartFaultProxy(t, target, storetest.Faults{Seed: 44, DropAfterCommit: 0.10, Unavailable: 0.05, Reads: true})
	bp := &bypass{host: u.Host}
	opts := azuritetest.FastRetries
	opts.Transport = bp
	client := azuritetest.NewTableWith(t, proxy.URL(), opts)
	b := tablestore.New(client, nil) // a scope per partition: boards b1, b2
	var stores []*etagstore.Store[storetest.IdxCard]
	for _, o := range storetest.StormStoreOptions() {
		stores = append(stores, storetest.NewIdxCards(b, o))
	}
	storm := storetest.IndexStorm{
		Goroutines: 64, Ops: ops, Boards: []string{"b1", "b2"}, Cards: 12, Titles: 12, Seed: 44,
		Key: func(board, card string) string { return board + "/" + card },
	}
	tally := storm.Run(t, stores)
	t.Logf("outcomes: %v", tally)
	t.Logf("faults: %v", proxy.Counts())
	bp.off.Store(true)
	check := storetest.NewIdxCards(b, nil)
	for _, board := range storm.Boards {
		problems, err := storetest.IdxCardProblems(t.Context(), check, board+"/", board+"/")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", board, p)
		}
	}
}
