package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// readManyCases are the cases of the ReadMany group of Run. Each gets the
// group's backend, whose ReadMany is set, and keys of its own (prefixed
// with its name).
var readManyCases = []struct {
	name string
	fn   func(t *testing.T, b driver.Backend)
}{
	{"AsRead", testReadManyAsRead},
	{"Missing", testReadManyMissing},
	{"Duplicates", testReadManyDuplicates},
	{"Empty", testReadManyEmpty},
	{"Deleted", testReadManyDeleted},
	{"Many", testReadManyMany},
	{"InvalidKey", testReadManyInvalidKey},
}

// runReadMany runs readManyCases on one backend (driver.Abilities.ReadMany),
// or skips them when the backend has no ReadMany.
func runReadMany(t *testing.T, newBackend NewBackend) {
	b := newBackend(t)
	if b.Abilities().ReadMany == nil {
		t.Skipf("%T has no Abilities.ReadMany", b)
	}
	for _, tc := range readManyCases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// requestCount is a driver.RequestCounter counting every request.
type requestCount struct{ n atomic.Int64 }

func (c *requestCount) Sent(context.Context, error) { c.n.Add(1) }

// readMany calls b's ReadMany and returns what it returned and how many
// requests it sent.
func readMany(t *testing.T, b driver.Backend, keys []string) ([]driver.Item, int64, error) {
	t.Helper()
	var c requestCount
	items, err := b.Abilities().ReadMany(driver.CountRequests(t.Context(), &c), keys)
	return items, c.n.Load(), err
}

// wantAsRead checks that ReadMany(keys) returns, for each key in order,
// what Read returns (ETag, Data, Meta), and for a missing key an Item with
// only its Key; it returns how many requests ReadMany sent.
func wantAsRead(t *testing.T, b driver.Backend, keys []string) int64 {
	t.Helper()
	got, requests, err := readMany(t, b, keys)
	if err != nil {
		t.Fatalf("ReadMany(%d keys): %v", len(keys), err)
	}
	want := make([]driver.Item, len(keys))
	for i, key := range keys {
		it, err := b.Read(t.Context(), key)
		switch {
		case errors.Is(err, etagstore.ErrNotFound):
			it = driver.Item{Key: key}
		case err != nil:
			t.Fatalf("Read(%q): %v", key, err)
		}
		want[i] = it
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadMany(%q) against Read of each key (-Read +ReadMany):\n%s", keys, diff)
	}
	return requests
}

// create stores a document under each of keys through a Store on b.
func create(t *testing.T, b driver.Backend, keys ...string) {
	t.Helper()
	s := etagstore.New[Page](b, nil)
	for i, key := range keys {
		mustCreate(t, s, key, Page{Title: key, Body: strings.Repeat("b", i), N: int64(i)})
	}
}

// testReadManyAsRead: documents found are what Read returns, in the
// order of the keys asked for.
func testReadManyAsRead(t *testing.T, b driver.Backend) {
	create(t, b, "as-a", "as-b", "as-c")
	wantAsRead(t, b, []string{"as-c", "as-a", "as-b"})
	wantAsRead(t, b, []string{"as-b"})
}

// testReadManyMissing: a missing key is no error; its Item has its Key,
// no ETag, nil Data and no Meta.
func testReadManyMissing(t *testing.T, b driver.Backend) {
	create(t, b, "mi-a", "mi-b")
	keys := []string{"mi-a", "mi-nobody", "mi-b", "mi-none"}
	wantAsRead(t, b, keys)
	got, _, err := readMany(t, b, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 3} {
		if diff := cmp.Diff(driver.Item{Key: keys[i]}, got[i]); diff != "" || got[i].Data != nil {
			t.Errorf("missing key %q (-want +got):\n%s(Data nil: %v)", keys[i], diff, got[i].Data == nil)
		}
	}
	wantAsRead(t, b, []string{"mi-nobody"})
}

// testReadManyDuplicates: a key asked for twice is returned twice, where
// it was asked for.
func testReadManyDuplicates(t *testing.T, b driver.Backend) {
	create(t, b, "du-a", "du-b")
	wantAsRead(t, b, []string{"du-a", "du-a", "du-nobody", "du-b", "du-nobody", "du-a"})
}

// testReadManyEmpty: no keys, no Items, and nothing sent.
func testReadManyEmpty(t *testing.T, b driver.Backend) {
	for _, keys := range [][]string{nil, {}} {
		got, requests, err := readMany(t, b, keys)
		if err != nil || len(got) != 0 || requests != 0 {
			t.Errorf("ReadMany(%#v) = %d items, %v after %d requests; want none, nil after none", keys, len(got), err, requests)
		}
	}
}

// testReadManyDeleted: a deleted key is missing, also after a fenced
// delete that keeps its fencing token beside it (driver.ModeTombstone).
func testReadManyDeleted(t *testing.T, b driver.Backend) {
	create(t, b, "de-a", "de-b", "de-c")
	s := etagstore.New[Page](b, nil)
	ctx := t.Context()
	if err := s.Delete(ctx, "de-a", etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(etagstore.WithFence(ctx, 3), "de-c", etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	keys := []string{"de-a", "de-b", "de-c"}
	wantAsRead(t, b, keys)
	got, _, err := readMany(t, b, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if got[i].ETag != "" || got[i].Data != nil {
			t.Errorf("deleted key %q: ReadMany found %+v, want it missing", keys[i], got[i])
		}
	}
}

// testReadManyMany: 100 keys, two in three stored, in an order of their
// own, are read in at most a tenth as many requests.
func testReadManyMany(t *testing.T, b driver.Backend) {
	const n = 100
	keys := make([]string, n)
	var stored []string
	for i := range keys {
		keys[i] = fmt.Sprintf("ma-%03d", i)
		if i%3 != 2 {
			stored = append(stored, keys[i])
		}
	}
	create(t, b, stored...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	requests := wantAsRead(t, b, keys)
	t.Logf("%d keys read in %d requests", n, requests)
	if requests < 1 || requests > n/10 {
		t.Errorf("ReadMany of %d keys sent %d requests, want 1 to %d", n, requests, n/10)
	}
}

// testReadManyInvalidKey: a key ValidateKey refuses fails the call as Read
// would (ErrInvalidKey), before anything is sent.
func testReadManyInvalidKey(t *testing.T, b driver.Backend) {
	create(t, b, "in-a")
	var bad string
	for _, key := range []string{strings.Repeat("k", 70000), "in/x#?\\"} {
		if b.ValidateKey(key) != nil {
			bad = key
			break
		}
	}
	if bad == "" {
		t.Skipf("%T accepts every key this case tries", b)
	}
	items, requests, err := readMany(t, b, []string{"in-a", bad})
	if !errors.Is(err, etagstore.ErrInvalidKey) || items != nil || requests != 0 {
		t.Fatalf("ReadMany with a key ValidateKey refuses = %d items, %v after %d requests; want none, ErrInvalidKey after none", len(items), err, requests)
	}
	wantOneSentinel(t, err)
}
