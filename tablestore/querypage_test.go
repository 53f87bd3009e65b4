package tablestore_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

type pagedTask struct {
	Title string
	N     int32
}

// TestQueryPaging: QueryPage pages through a filter's matches in table
// order over "PartitionKey/RowKey" keys, across partitions and across the
// service's 1000-entity pages; its tokens are bound to the filter.
func TestQueryPaging(t *testing.T) {
	ctx := t.Context()
	s := tablestore.NewStore[pagedTask](azuritetest.NewTable(t), nil, nil)
	var all []string
	for _, pk := range []string{"a", "a-b", "b"} {
		for i := range 450 {
			k := fmt.Sprintf("%s/%04d", pk, i)
			all = append(all, k) // table order: "a" < "a-b" < "b"
		}
	}
	create := make(chan string)
	errs := make(chan error, len(all))
	for range 8 {
		go func() {
			for k := range create {
				var n int32
				fmt.Sscanf(k[len(k)-4:], "%d", &n)
				_, err := s.Create(ctx, k, pagedTask{Title: k, N: n})
				errs <- err
			}
		}()
	}
	for _, k := range all {
		create <- k
	}
	close(create)
	for range all {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	ranged := tablestore.Lt("N", int32(300))
	var wantRanged []string
	for _, k := range all {
		var n int
		fmt.Sscanf(k[len(k)-4:], "%d", &n)
		if n < 300 {
			wantRanged = append(wantRanged, k)
		}
	}
	for _, tc := range []struct {
		filter tablestore.Filter
		want   []string
		limit  int
	}{
		{tablestore.Filter{}, all, 1100}, // across the service's 1000
		{tablestore.Filter{}, all, 449},  // pages end inside and between partitions
		{ranged, wantRanged, 1000},
		{ranged, wantRanged, 77},
	} {
		var got []string
		token, pages := "", 0
		for {
			p, err := tablestore.QueryPage(ctx, s, tc.filter, tc.limit, token)
			if err != nil {
				t.Fatalf("QueryPage(%s, %d) #%d: %v", tc.filter, tc.limit, pages+1, err)
			}
			pages++
			if p.Next != "" && len(p.Docs) != tc.limit {
				t.Fatalf("QueryPage(%s, %d) #%d holds %d documents and a Next", tc.filter, tc.limit, pages, len(p.Docs))
			}
			for _, d := range p.Docs {
				if d.Value.Title != d.Key {
					t.Fatalf("document %q decoded as %+v", d.Key, d.Value)
				}
				got = append(got, d.Key)
			}
			if p.Next == "" {
				break
			}
			token = p.Next
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("QueryPage(%s, %d): %d keys, want %d", tc.filter, tc.limit, len(got), len(tc.want))
		}
		if n := (len(tc.want) + tc.limit - 1) / tc.limit; pages != n {
			t.Errorf("QueryPage(%s, %d): %d pages, want %d", tc.filter, tc.limit, pages, n)
		}
	}

	// Store.Page over "PartitionKey/RowKey" keys: a prefix without '/'
	// selects partitions, one with '/' rows of one partition.
	for _, tc := range []struct {
		prefix string
		n      int
	}{{"a", 900}, {"a/", 450}, {"a-b/00", 100}, {"", 1350}} {
		token, got := "", 0
		for {
			p, err := s.Page(ctx, tc.prefix, 128, token)
			if err != nil {
				t.Fatalf("Page(%q): %v", tc.prefix, err)
			}
			got += len(p.Docs)
			if p.Next == "" {
				break
			}
			token = p.Next
		}
		if got != tc.n {
			t.Errorf("Page(%q) walked %d documents, want %d", tc.prefix, got, tc.n)
		}
	}

	// Tokens are bound to their filter and kind of listing.
	p, err := tablestore.QueryPage(ctx, s, ranged, 10, "")
	if err != nil || p.Next == "" {
		t.Fatalf("QueryPage = %+v, %v", p, err)
	}
	lp, err := s.Page(ctx, "", 10, "")
	if err != nil || lp.Next == "" {
		t.Fatalf("Page = %+v, %v", lp, err)
	}
	for name, call := range map[string]func() error{
		"another filter": func() error {
			_, err := tablestore.QueryPage(ctx, s, tablestore.Lt("N", int32(301)), 10, p.Next)
			return err
		},
		"a list token":  func() error { _, err := tablestore.QueryPage(ctx, s, tablestore.Filter{}, 10, lp.Next); return err },
		"a query token": func() error { _, err := s.Page(ctx, "", 10, p.Next); return err },
		"limit 0":       func() error { _, err := tablestore.QueryPage(ctx, s, ranged, 0, ""); return err },
		"bad filter":    func() error { _, err := tablestore.QueryPage(ctx, s, tablestore.Eq("no such", 1), 10, ""); return err },
	} {
		if err := call(); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
}
