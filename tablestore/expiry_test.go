package tablestore_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Documents that expire, on a table with Options.Partition (one commit
// scope).
func TestExpiry(t *testing.T) {
	storetest.RunExpiry(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	})
}

// Documents that expire, on a table without Options.Partition: keys are
// "PartitionKey/RowKey", a commit scope per partition, and Sweep lists
// the due expiry entries of every partition.
func TestExpiryByPartition(t *testing.T) {
	storetest.RunExpiry(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), nil)
	})
}

// TestExpiryQuery: tablestore's Query and QueryPage skip a document from
// the instant it expires by the Store's clock, and return it, with
// Doc.Expires, until 1 ms before; with and without Options.Partition.
func TestExpiryQuery(t *testing.T) {
	for name, opts := range map[string]*tablestore.Options{"Partition": {Partition: "docs"}, "ByPartition": nil} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			clock := storetest.NewFakeClock(storetest.ExpAt.Add(-time.Millisecond))
			b := tablestore.New(azuritetest.NewTable(t), opts)
			s := etagstore.New[storetest.ExpCard](b, &etagstore.Options{Clock: clock}, storetest.ExpUntil, storetest.ExpTitle, storetest.ExpTag)
			key := func(card string) string {
				if opts == nil {
					return "b1/" + card
				}
				return "b1-" + card
			}
			later := storetest.ExpAt.Add(time.Hour)
			cards := map[string]storetest.ExpCard{
				key("c1"): {Title: "t1", Tag: "red", Until: storetest.ExpAt},
				key("c2"): {Title: "t2", Tag: "red"},
				key("c3"): {Title: "t3", Tag: "red", Until: later},
				key("c4"): {Title: "t4", Tag: "red", Until: storetest.ExpAt},
				key("c5"): {Title: "t5", Tag: "blue", Until: storetest.ExpAt},
			}
			for k, c := range cards {
				if _, err := s.Create(ctx, k, c); err != nil {
					t.Fatalf("Create(%q): %v", k, err)
				}
			}
			red := tablestore.Eq("Tag", "red")
			query := func() []string {
				t.Helper()
				var keys []string
				for d, err := range tablestore.Query(ctx, s, red) {
					if err != nil {
						t.Fatalf("Query: %v", err)
					}
					checkExpires(t, "Query", d, cards[d.Key].Until)
					keys = append(keys, d.Key)
				}
				return keys
			}
			paged := func(limit int) []string {
				t.Helper()
				var keys []string
				token := ""
				for range 50 {
					p, err := tablestore.QueryPage(ctx, s, red, limit, token)
					if err != nil {
						t.Fatalf("QueryPage(%d): %v", limit, err)
					}
					for _, d := range p.Docs {
						checkExpires(t, "QueryPage", d, cards[d.Key].Until)
						keys = append(keys, d.Key)
					}
					if token = p.Next; token == "" {
						return keys
					}
				}
				t.Fatalf("QueryPage(%d): no end after 50 pages", limit)
				return nil
			}
			want := func(what string, got []string, keys ...string) {
				t.Helper()
				slices.SortFunc(keys, b.Abilities().KeyOrder())
				if !slices.Equal(got, keys) {
					t.Errorf("at %v: %s = %q, want %q", clock.Now(), what, got, keys)
				}
			}
			all := []string{key("c1"), key("c2"), key("c3"), key("c4")}
			want("Query", query(), all...)
			for _, limit := range []int{1, 2, 10} {
				want(fmt.Sprintf("QueryPage(%d) walked", limit), paged(limit), all...)
			}
			clock.Set(storetest.ExpAt)
			live := []string{key("c2"), key("c3")}
			want("Query", query(), live...)
			for _, limit := range []int{1, 2, 10} {
				want(fmt.Sprintf("QueryPage(%d) walked", limit), paged(limit), live...)
			}
			// A filter that matches only expired documents yields nothing.
			for d, err := range tablestore.Query(ctx, s, tablestore.Eq("Tag", "blue")) {
				t.Errorf("Query(Tag blue) yielded %q, %v; want nothing", d.Key, err)
			}
			p, err := tablestore.QueryPage(ctx, s, tablestore.Eq("Tag", "blue"), 10, "")
			if err != nil || len(p.Docs) != 0 || p.Next != "" {
				t.Errorf("QueryPage(Tag blue) = %d docs, next %q, %v; want none", len(p.Docs), p.Next, err)
			}
			// The expired documents are stored still: a Store without the
			// Expiry index queries them.
			plain := etagstore.New[storetest.ExpCard](b, nil)
			n := 0
			for _, err := range tablestore.Query(ctx, plain, red) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != 4 {
				t.Errorf("a Store without Expiry queried %d red cards, want 4 (expiry hides, Sweep deletes)", n)
			}
			if _, err := s.Get(ctx, key("c1")); !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("Get(expired) = %v, want ErrNotFound", err)
			}
		})
	}
}

func checkExpires(t *testing.T, what string, d etagstore.Doc[storetest.ExpCard], want time.Time) {
	t.Helper()
	if !d.Expires.Equal(want) || d.Expires.IsZero() != want.IsZero() {
		t.Errorf("%s(%q): Doc.Expires = %v, want %v", what, d.Key, d.Expires, want)
	}
}
