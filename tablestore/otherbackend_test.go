package tablestore_test

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// TestExtrasOnAnotherBackend: every typed extra of tablestore on a Store
// over another backend answers errors.ErrUnsupported (a call the backend
// cannot serve, not the caller's bad input) in one line, and no
// sentinel of the caller's input matches.
func TestExtrasOnAnotherBackend(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[card](memstore.New(nil), nil)
	d, err := s.Create(ctx, "k", card{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{}
	_, calls["QueryPage"] = tablestore.QueryPage(ctx, s, tablestore.Filter{}, 10, "")
	for _, err := range tablestore.Query(ctx, s, tablestore.Filter{}) {
		calls["Query"] = err
	}
	_, calls["Merge"] = tablestore.Merge(ctx, s, d)
	_, calls["UpsertMerge"] = tablestore.UpsertMerge(ctx, s, "k", card{})
	_, calls["Batch"] = tablestore.NewBatch(s).Upsert("k", card{}).Submit(ctx)
	for name, err := range calls {
		if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s on a memstore Store = %v, want errors.ErrUnsupported alone", name, err)
		}
	}
}
