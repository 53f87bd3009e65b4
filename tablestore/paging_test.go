package tablestore_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

func TestPaging(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	})
}

// TestPagingAcrossPartitions runs the paging suite on a table without
// Options.Partition, each of its keys in a partition of its own (a row
// "r" under it), so that every listing and page is a query across
// partitions; and the key-order case on "PartitionKey/RowKey" keys whose
// partitions extend one another, in the order the Backend declares.
func TestPagingAcrossPartitions(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) driver.Backend {
		return storetest.KeySuffix(tablestore.New(azuritetest.NewTable(t), nil), "/r")
	})
	storetest.RunKeyOrder(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), nil)
	})
}

// TestPageCostsOneQueryAPage: across partitions a page is one query,
// however many partitions it spans, and a listing one query per service
// page (issue #25, part 5). 240 documents in 120 partitions of two rows
// take one request for each page of 50 or 48 (the last page of 48 is
// full: it asks for one entity more, to know that none follows), one for
// the whole List, and, with service pages of 16, the fewest requests that
// fill each page. A walk that visited partitions one by one would take
// hundreds.
func TestPageCostsOneQueryAPage(t *testing.T) {
	const partitions, rows = 120, 2
	client, requests := countedTable(t)
	var want []string
	for p := range partitions {
		for r := range rows {
			want = append(want, fmt.Sprintf("p%03d/r%d", p, r))
		}
	}
	fillKeys(t, tablestore.NewStore[Task](client, nil, nil), want)

	for _, tc := range []struct {
		pageSize        int32
		limit           int
		pages, requests int
	}{
		{0, 50, 5, 5},
		{0, 48, 5, 5},
		{16, 50, 5, 4*4 + 3}, // 16+16+16+3 entities a page; the last 16+16+8
		{16, 47, 6, 5*3 + 1}, // 16+16+16 entities a page; the last 5
	} {
		s := tablestore.NewStore[Task](client, &tablestore.Options{PageSize: tc.pageSize}, nil)
		requests.Store(0)
		got, pages := walkPages(t, s, tc.limit)
		if !slices.Equal(got, want) {
			t.Errorf("PageSize %d: pages of %d hold %d keys %q…, want %d keys %q…", tc.pageSize, tc.limit, len(got), got[:min(4, len(got))], len(want), want[:4])
		}
		if n := requests.Load(); pages != tc.pages || n != int64(tc.requests) {
			t.Errorf("PageSize %d: pages of %d: %d pages in %d requests, want %d in %d", tc.pageSize, tc.limit, pages, n, tc.pages, tc.requests)
		}
	}

	requests.Store(0)
	n := 0
	for _, err := range tablestore.NewStore[Task](client, nil, nil).List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != len(want) || requests.Load() != 1 {
		t.Errorf("List read %d documents in %d requests, want %d in 1", n, requests.Load(), len(want))
	}
}

// walkPages pages through s with limit and returns the keys and the number
// of pages.
func walkPages(t *testing.T, s *etagstore.Store[Task], limit int) (keys []string, pages int) {
	t.Helper()
	token := ""
	for {
		p, err := s.Page(t.Context(), "", limit, token)
		if err != nil {
			t.Fatalf("Page(%d) #%d: %v", limit, pages+1, err)
		}
		pages++
		for _, d := range p.Docs {
			keys = append(keys, d.Key)
		}
		if token = p.Next; token == "" {
			return keys, pages
		}
	}
}

// fillKeys creates a Task under each of keys, from 8 goroutines.
func fillKeys(t *testing.T, s *etagstore.Store[Task], keys []string) {
	t.Helper()
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range work {
				if _, err := s.Create(t.Context(), k, Task{Title: k}); err != nil {
					t.Errorf("Create(%q): %v", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}
