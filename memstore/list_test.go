package memstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// keyRunes are the characters random keys are made of: ASCII around '/',
// and the edges of UTF-8's length classes and of the range UTF-16 orders
// differently from code points.
var keyRunes = []rune{'/', '0', 'a', 'b', 0x7f, 0xe9, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xffff, 0x10000, 0x10ffff}

func randomKey(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(4) {
		b.WriteRune(keyRunes[r.IntN(len(keyRunes))])
	}
	return b.String()
}

// listKeys is what List and ListPage must yield: the keys of model that
// start with prefix (a byte prefix, which may end inside a character), in
// driver.CompareKeys order; a key starting with U+FFFF (reserved for
// index entries) only when prefix starts with U+FFFF too.
func listKeys(model map[string]bool, prefix string) []string {
	var keys []string
	for k := range model {
		if strings.HasPrefix(k, prefix) && (!strings.HasPrefix(k, "\uffff") || strings.HasPrefix(prefix, "\uffff")) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, driver.CompareKeys)
	return keys
}

// pageAll walks ListPage with limit and checks each page's shape.
func pageAll(t *testing.T, b *memstore.Backend, prefix string, limit int) []string {
	t.Helper()
	var keys []string
	after := ""
	for {
		items, more, err := b.ListPage(t.Context(), prefix, after, limit)
		if err != nil {
			t.Fatalf("ListPage(%+q, %+q, %d): %v", prefix, after, limit, err)
		}
		if len(items) > limit || (more && len(items) != limit) {
			t.Fatalf("ListPage(%+q, %+q, %d) = %d items, more %v", prefix, after, limit, len(items), more)
		}
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		if !more {
			return keys
		}
		after = items[len(items)-1].Key
	}
}

// List and ListPage agree with a model (a set of keys sorted by
// driver.CompareKeys) through random creates, overwrites, deletes and
// commits, for prefixes that are byte prefixes of the keys (ending inside
// a character too) and pages of several sizes.
func TestListMatchesModel(t *testing.T) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(1, 2))
	b := memstore.New(nil)
	model := map[string]bool{}
	for round := range 40 {
		for range 50 {
			k := randomKey(r)
			switch it, err := b.Read(ctx, k); {
			case errors.Is(err, driver.ErrNotFound):
				if _, err := b.Write(ctx, k, driver.Write{Data: []byte(`{}`), Cond: driver.Cond{Kind: driver.CondCreate}}); err != nil {
					t.Fatal(err)
				}
				model[k] = true
			case err != nil:
				t.Fatal(err)
			case r.IntN(3) == 0:
				if _, err := b.Write(ctx, k, driver.Write{Data: []byte(`{"n":1}`), Cond: driver.IfMatch(it.ETag)}); err != nil {
					t.Fatal(err)
				}
			case r.IntN(2) == 0:
				if err := b.Delete(ctx, k, it.ETag); err != nil {
					t.Fatal(err)
				}
				delete(model, k)
			default: // delete it and create another in one commit
				k2 := randomKey(r)
				if model[k2] || k2 == k {
					continue
				}
				if _, err := b.Abilities().Commit(ctx, []driver.Action{
					{Key: k, Delete: true, Write: driver.Write{Cond: driver.IfMatch(it.ETag)}},
					{Key: k2, Write: driver.Write{Data: []byte(`{}`), Cond: driver.Cond{Kind: driver.CondCreate}}},
				}); err != nil {
					t.Fatal(err)
				}
				delete(model, k)
				model[k2] = true
			}
		}
		prefixes := []string{""}
		for range 5 {
			k := randomKey(r)
			prefixes = append(prefixes, k[:1+r.IntN(len(k))])
		}
		for _, prefix := range prefixes {
			want := listKeys(model, prefix)
			var got []string
			for it, err := range b.List(ctx, prefix) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, it.Key)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("round %d: List(%+q) keys (-want +got):\n%s", round, prefix, diff)
			}
			for _, limit := range []int{1, 3, 50} {
				if diff := cmp.Diff(want, pageAll(t, b, prefix, limit)); diff != "" {
					t.Fatalf("round %d: ListPage(%+q) by %d, keys (-want +got):\n%s", round, prefix, limit, diff)
				}
			}
		}
	}
}

// A listing longer than List's read of one page yields every key once, in
// order, and its consumer may write to the backend while it runs (List
// holds no lock while it yields).
func TestListWritesWhileListing(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	var want []string
	for i := range 1000 {
		k := fmt.Sprintf("k/%04d", i)
		want = append(want, k)
		if _, err := b.Write(ctx, k, driver.Write{Data: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for it, err := range b.List(ctx, "k/") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, it.Key)
		// Rewrite the item seen, and add a key before the listing's place.
		if _, err := b.Write(ctx, it.Key, driver.Write{Data: []byte(`2`), Cond: driver.IfMatch(it.ETag)}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write(ctx, "k/-"+it.Key, driver.Write{Data: []byte(`3`)}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List while writing, keys (-want +got):\n%s", diff)
	}
}

// A page costs the same however many documents the backend holds: its
// allocations do not grow with them (a scan of every key would).
func TestListPageAllocationsDoNotGrow(t *testing.T) {
	ctx := t.Context()
	allocs := func(n int) float64 {
		b := memstore.New(nil)
		for i := range n {
			if _, err := b.Write(ctx, fmt.Sprintf("doc/%06d", i), driver.Write{Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		after := fmt.Sprintf("doc/%06d", n/2)
		return testing.AllocsPerRun(20, func() {
			if items, _, err := b.ListPage(ctx, "doc/", after, 50); err != nil || len(items) != 50 {
				t.Fatalf("ListPage = %d items, %v", len(items), err)
			}
		})
	}
	if small, large := allocs(200), allocs(50_000); large > small {
		t.Errorf("ListPage of 50 allocates %v times at 50,000 documents, %v at 200", large, small)
	}
}

// Read returns the bytes written, without copying them: it allocates
// nothing. Their capacity is cut to their length, so that two readers
// appending to them each get a copy.
func TestReadSharesData(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	data := make([]byte, 2, 64)
	copy(data, `{}`)
	if _, err := b.Write(ctx, "k", driver.Write{Data: data}); err != nil {
		t.Fatal(err)
	}
	it, err := b.Read(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if string(it.Data) != `{}` || cap(it.Data) != len(it.Data) {
		t.Errorf("Read = %q with capacity %d, want {} with capacity 2", it.Data, cap(it.Data))
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = b.Read(ctx, "k") }); n != 0 {
		t.Errorf("Read allocates %v times, want 0", n)
	}
}

// Writers creating and deleting keys race readers paging through them;
// afterwards List holds exactly the keys the writers left. (Under -race
// this also checks that the B-tree is only changed under the lock.)
func TestListRacesWriters(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	const writers, perWriter = 8, 200
	var writing, reading sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		writing.Go(func() {
			for i := range perWriter {
				k := fmt.Sprintf("k/%d/%03d", w, i)
				etag, err := b.Write(ctx, k, driver.Write{Data: []byte(`{}`), Cond: driver.Cond{Kind: driver.CondCreate}})
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 1 { // keep the even ones
					if err := b.Delete(ctx, k, etag); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	for range 2 {
		reading.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				prev := ""
				for it, err := range b.List(ctx, "k/") {
					if err != nil || (prev != "" && driver.CompareKeys(prev, it.Key) >= 0) {
						t.Errorf("List yielded %q after %q, %v", it.Key, prev, err)
						return
					}
					prev = it.Key
				}
			}
		})
	}
	writing.Wait()
	close(done)
	reading.Wait()
	var want []string
	for w := range writers {
		for i := 0; i < perWriter; i += 2 {
			want = append(want, fmt.Sprintf("k/%d/%03d", w, i))
		}
	}
	if diff := cmp.Diff(want, pageAll(t, b, "k/", 50)); diff != "" {
		t.Errorf("keys left (-want +got):\n%s", diff)
	}
}
