package tablestore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// TestIndexedBatchOverExpired: on a Store whose documents expire, a
// Batch's Create of a key holding an expired document replaces it, as
// Store.Create does (a Create reads its key there), and an Upsert
// starting from the cached version, expired since, replaces it too: the
// expired document's entries go, the new ones come. A Create of a key
// whose document is live still fails with ErrExists, writing nothing.
func TestIndexedBatchOverExpired(t *testing.T) {
	ctx := t.Context()
	clock := storetest.NewFakeClock(storetest.ExpAt.Add(-time.Millisecond))
	s := etagstore.New[storetest.ExpCard](tablestore.New(azuritetest.NewTable(t), nil), &etagstore.Options{Clock: clock}, storetest.ExpUntil, storetest.ExpTitle)
	for k, c := range map[string]storetest.ExpCard{
		"b1/c1": {Title: "t1", Until: storetest.ExpAt},
		"b1/c2": {Title: "t2", Until: storetest.ExpAt},
		"b1/c3": {Title: "t3"},
	} {
		if _, err := s.Create(ctx, k, c); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(time.Millisecond) // c1 and c2 have expired
	if _, err := tablestore.NewBatch(s).
		Create("b1/c1", storetest.ExpCard{Title: "n1"}).
		Upsert("b1/c2", storetest.ExpCard{Title: "n2"}).
		Create("b1/c4", storetest.ExpCard{Title: "n4"}).
		Submit(ctx); err != nil {
		t.Fatalf("Submit over expired documents: %v", err)
	}
	holders := func(want map[string]string) {
		t.Helper()
		for value, key := range want {
			got := ""
			h, err := s.GetBy(ctx, storetest.ExpTitle, "b1/"+value)
			switch {
			case err == nil:
				got = h.Key
			case !errors.Is(err, etagstore.ErrNotFound):
				t.Fatalf("GetBy %q: %v", value, err)
			}
			if got != key {
				t.Errorf("%q is held by %q, want %q", value, got, key)
			}
		}
	}
	holders(map[string]string{"t1": "", "t2": "", "n1": "b1/c1", "n2": "b1/c2", "t3": "b1/c3", "n4": "b1/c4"})

	_, err := tablestore.NewBatch(s).Create("b1/c5", storetest.ExpCard{Title: "n5"}).Create("b1/c3", storetest.ExpCard{Title: "n3"}).Submit(ctx)
	var be *tablestore.BatchError
	if !errors.Is(err, etagstore.ErrExists) || !errors.As(err, &be) || be.Index != 1 {
		t.Fatalf("Submit creating a live key = %v; want ErrExists in a *BatchError naming action 1", err)
	}
	holders(map[string]string{"n5": "", "n3": "", "t3": "b1/c3"})
}
