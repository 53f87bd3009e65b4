package tablestore_test

import (
	"testing"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// A merge writes the properties it names, empty ones too: a field tagged
// omitempty that a whole write leaves out is cleared by a merge naming it,
// and a batch's Create leaves it out as Store.Create does.
func TestMergeWritesNamedEmptyFields(t *testing.T) {
	ctx := t.Context()
	s := tablestore.NewStore[storetest.Sparse](azuritetest.NewTable(t), &tablestore.Options{Partition: "p"}, nil)
	if _, err := s.Create(ctx, "k", storetest.Sparse{Title: "t", Owner: "o", Count: 3}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	d.Value.Owner, d.Value.Count = "", 0
	if _, err := tablestore.Merge(ctx, s, d, "Owner", "Count"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || got.Value.Owner != "" || got.Value.Count != 0 || got.Value.Title != "t" {
		t.Errorf("after a merge of the emptied fields: %+v, %v", got.Value, err)
	}
	if _, err := tablestore.NewBatch(s).Create("b", storetest.Sparse{Title: "b"}).Submit(ctx); err != nil {
		t.Fatal(err)
	}
	it, err := s.Backend().Read(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(it.Data); got != `{"Title":"b"}` {
		t.Errorf("a batch's Create stored %s, want only Title", got)
	}
}
