package tablestore_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// queryRecorder is an HTTP transport to Azurite that keeps the URL of
// every entity query (a GET with a $filter).
type queryRecorder struct {
	mu      sync.Mutex
	queries []string
}

func (r *queryRecorder) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && req.URL.Query().Has("$filter") {
		r.mu.Lock()
		r.queries = append(r.queries, req.URL.String())
		r.mu.Unlock()
	}
	return azuritetest.Transport.Do(req)
}

// take returns the queries sent since the last call.
func (r *queryRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

// newRecordedBackend is a Backend on a fresh table whose queries rec
// keeps.
func newRecordedBackend(t *testing.T, opts *tablestore.Options) (*tablestore.Backend, *queryRecorder) {
	t.Helper()
	rec := &queryRecorder{}
	copts := azuritetest.FastRetries
	copts.Transport = rec
	return tablestore.New(azuritetest.NewTableWith(t, azuritetest.Host(t, "Table"), copts), opts), rec
}

// readManyAsRead checks that b's ReadMany(keys) is Read of each key, in
// order (a missing key an Item with only its Key).
func readManyAsRead(t *testing.T, b *tablestore.Backend, keys []string) {
	t.Helper()
	got, err := b.Abilities().ReadMany(t.Context(), keys)
	if err != nil {
		t.Fatalf("ReadMany: %v", err)
	}
	want := make([]driver.Item, len(keys))
	for i, key := range keys {
		it, err := b.Read(t.Context(), key)
		if errors.Is(err, etagstore.ErrNotFound) {
			it, err = driver.Item{Key: key}, nil
		}
		if err != nil {
			t.Fatalf("Read(%q): %v", key, err)
		}
		want[i] = it
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadMany against Read (-Read +ReadMany):\n%s", diff)
	}
}

// ReadMany sends one query per partition for up to 14 keys (the service's
// limit of 15 comparisons in a filter, one of them the PartitionKey's),
// whatever Options.PageSize says, and reads keys of several partitions
// in one call.
func TestReadManyQueries(t *testing.T) {
	b, rec := newRecordedBackend(t, &tablestore.Options{PageSize: 4})
	s := etagstore.New[Task](b, nil)
	ctx := t.Context()
	var keys []string
	for _, pk := range []string{"p1", "p2", "p3"} {
		for i := range 30 {
			key := fmt.Sprintf("%s/k%02d", pk, i)
			keys = append(keys, key)
			if i%2 == 0 {
				if _, err := s.Create(ctx, key, Task{Title: key, N: int64(i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name    string
		keys    []string
		queries int
	}{
		{"one key", keys[:1], 1},
		{"14 keys", keys[:14], 1},
		{"15 keys", keys[:15], 2},
		{"30 keys", keys[:30], 3},
		{"a key twice counts once", append(keys[:14:14], keys[0], keys[13]), 1},
		{"two partitions interleaved", []string{"p2/k00", "p1/k01", "p2/k01", "p1/k00", "p1/k02"}, 2},
		{"three partitions, 30 keys each", keys, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.take()
			readManyAsRead(t, b, tc.keys)
			if got := len(rec.take()); got != tc.queries { // readManyAsRead's Reads are no queries
				t.Errorf("ReadMany of %d keys sent %d queries, want %d", len(tc.keys), got, tc.queries)
			}
		})
	}
}

// Long keys are read in queries whose URLs stay short enough for the
// service (Azurite refuses request headers over 16 KiB): fewer keys per
// query, down to one key per query when both key parts are the longest.
func TestReadManyLongKeys(t *testing.T) {
	longest := strings.Repeat("é", 512) // 1 KiB of UTF-16, 3 KiB URL-escaped: the longest key part
	for _, tc := range []struct {
		name, partition string
		minQ, maxQ      int // for 14 keys
	}{
		{"long row keys", "p", 2, 13},
		{"longest partition and row keys", longest, 14, 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, rec := newRecordedBackend(t, &tablestore.Options{Partition: tc.partition})
			s := etagstore.New[Task](b, nil)
			var keys []string
			for i := range 14 {
				key := fmt.Sprintf("%03d%s", i, longest[:len(longest)-3*len("é")])
				keys = append(keys, key)
				if i%3 != 1 {
					if _, err := s.Create(t.Context(), key, Task{N: int64(i)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			rec.take()
			readManyAsRead(t, b, keys)
			queries := rec.take()
			for _, q := range queries {
				if len(q) > 12<<10 {
					t.Errorf("a query URL of %d bytes", len(q))
				}
			}
			t.Logf("%d keys of 1 KiB read in %d queries", len(keys), len(queries))
			if len(queries) < tc.minQ || len(queries) > tc.maxQ {
				t.Errorf("%d keys were read in %d queries, want %d to %d", len(keys), len(queries), tc.minQ, tc.maxQ)
			}
		})
	}
}

// A fence record's RowKey (U+FFFF …) is no key ReadMany reads: it is
// refused as Read refuses it, and nothing is sent.
func TestReadManyRecordKey(t *testing.T) {
	b, rec := newRecordedBackend(t, &tablestore.Options{Partition: "p"})
	_, err := b.Abilities().ReadMany(t.Context(), []string{"k", "\uFFFFf.k"})
	if !errors.Is(err, etagstore.ErrInvalidKey) {
		t.Errorf("ReadMany of a fence record's RowKey = %v, want ErrInvalidKey", err)
	}
	if q := rec.take(); len(q) != 0 {
		t.Errorf("ReadMany with a refused key sent %d queries", len(q))
	}
}
