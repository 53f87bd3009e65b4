package docstore

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/docstore"

	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// pages counts the pages and items a backend lists.
type pages struct {
	edriver.Backend
	calls, items atomic.Int64
	prefixes     []string
}

func (p *pages) ListPage(ctx context.Context, prefix, after string, limit int) ([]edriver.Item, bool, error) {
	p.calls.Add(1)
	p.prefixes = append(p.prefixes, prefix)
	items, more, err := p.Backend.ListPage(ctx, prefix, after, limit)
	p.items.Add(int64(len(items)))
	return items, more, err
}

type row struct {
	Name string `docstore:"name"`
	N    int
	Tag  string
}

func fill(t *testing.T, coll *docstore.Collection, n int) {
	t.Helper()
	al := coll.Actions()
	for i := range n {
		al.Put(&row{Name: fmt.Sprintf("k%02d", i), N: (i * 7) % n, Tag: fmt.Sprintf("t%d", i%3)})
	}
	if err := al.Do(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, it *docstore.DocumentIterator) []string {
	t.Helper()
	defer it.Stop()
	var out []string
	for {
		var r row
		err := it.Next(t.Context(), &r)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Name)
	}
}

// Queries stream a page at a time: a Limit stops reading, a bound on the
// key ends the listing, equality on the key lists that key's prefix.
func TestQueryStreams(t *testing.T) {
	b := &pages{Backend: memstore.New(nil)}
	coll, err := OpenCollection(b, "name", &Options{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	fill(t, coll, 50)
	ctx := t.Context()
	for _, tc := range []struct {
		name      string
		q         *docstore.Query
		want      []string
		wantPages int64
	}{
		{"limit", coll.Query().Limit(5), []string{"k00", "k01", "k02", "k03", "k04"}, 1},
		{"key below", coll.Query().Where("name", "<", "k03"), []string{"k00", "k01", "k02"}, 1},
		{"key equal", coll.Query().Where("name", "=", "k42"), []string{"k42"}, 1},
		{"filter in memory", coll.Query().Where("Tag", "=", "t1").Where("N", ">", 40), []string{"k07", "k13", "k28", "k49"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.calls.Store(0)
			got := names(t, tc.q.Get(ctx))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n := b.calls.Load(); n != tc.wantPages {
				t.Errorf("%d pages read, want %d", n, tc.wantPages)
			}
		})
	}
	if got := b.prefixes[len(b.prefixes)-6]; got != "k42" {
		t.Errorf("key equality listed prefix %q, want k42", got)
	}
}

// OrderBy on a member sorts in memory; with a Limit it keeps only
// Offset+Limit matches while pages stream.
func TestQueryOrderBy(t *testing.T) {
	coll, err := OpenCollection(memstore.New(nil), "name", &Options{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	fill(t, coll, 50)
	got := names(t, coll.Query().OrderBy("N", docstore.Descending).Offset(1).Limit(3).Get(t.Context()))
	// N = 7i mod 50: 49 (i=7), 48 (i=14), 47 (i=21), 46 (i=28).
	if diff := cmp.Diff([]string{"k14", "k21", "k28"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	plan, err := coll.Query().OrderBy("N", docstore.Ascending).Plan()
	if err != nil || !strings.Contains(plan, "sorted in memory") {
		t.Errorf("plan %q, %v", plan, err)
	}
}

// On tables, string, boolean and time filters become the query's
// $filter; numbers are checked in memory.
func TestQueryTablePushdown(t *testing.T) {
	coll, err := OpenCollection(tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"}), "name", &Options{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	fill(t, coll, 30)
	q := coll.Query().Where("Tag", "in", []string{"t1", "t2"}).Where("name", ">=", "k20").Where("N", "<", 10)
	plan, err := q.Plan()
	if err != nil {
		t.Fatal(err)
	}
	// A string comparison lets through a member holding a number, as a value stored in parts does.
	if want := "$filter=(((Tag eq 't1') or (Tag eq 't2')) or (Tag ge 0)) and (RowKey ge 'k20') (2 of 3 filters)"; !strings.Contains(plan, want) {
		t.Errorf("plan %q, want it to hold %q", plan, want)
	}
	// N = 7i mod 30 for i ≥ 20 with i mod 3 ≠ 0: 20→20, 22→4, 23→11, 25→25, 26→2, 28→16, 29→23.
	if diff := cmp.Diff([]string{"k22", "k26"}, names(t, q.Get(t.Context()))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
