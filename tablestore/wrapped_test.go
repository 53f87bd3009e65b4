package tablestore_test

import (
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// A table Backend behind a pass-through wrapper keeps its entity codec and
// its extras: Query, QueryPage, Merge and batches reach it through As.
func TestExtrasThroughAWrapper(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[Task](storetest.Wrap(tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})), nil)
	if _, ok := s.Codec().(tablestore.EntityCodec); !ok {
		t.Fatalf("codec behind a wrapper = %T, want tablestore.EntityCodec", s.Codec())
	}
	d, err := s.Create(ctx, "a", Task{Title: "first", N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tablestore.NewBatch(s).Create("b", Task{Title: "second", N: 2}).Submit(ctx); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if _, err := tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "a", Value: Task{Title: "merged"}, ETag: d.ETag}, "Title"); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	var titles []string
	for d, err := range tablestore.Query(ctx, s, tablestore.Gt("N", 0)) {
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		titles = append(titles, d.Value.Title)
	}
	if len(titles) != 2 || titles[0] != "merged" || titles[1] != "second" {
		t.Fatalf("Query = %q, want [merged second]", titles)
	}
	p, err := tablestore.QueryPage(ctx, s, tablestore.Gt("N", 0), 1, "")
	if err != nil || len(p.Docs) != 1 || p.Next == "" {
		t.Fatalf("QueryPage = %+v, %v", p, err)
	}
}
