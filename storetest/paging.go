package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// pagingTests are the cases of Store.Page (Backend.ListPage).
var pagingTests = []struct {
	name string
	fn   func(t *testing.T, s *etagstore.Store[Page])
}{
	{"PageSizes", testPageSizes},
	{"PagePrefixes", testPagePrefixes},
	{"PageUnicodeOrder", testPageUnicodeOrder},
	{"PageKeyOrder", testPageKeyOrder},
	{"PageInvalid", testPageInvalid},
	{"PageConcurrentChanges", testPageConcurrentChanges},
	{"PageMany", testPageMany},
	{"PageAboveServiceMax", testPageAboveServiceMax},
	{"PageAtMaxKeyLength", testPageAtMaxKeyLength},
}

// RunPaging runs the paging cases (Store.Page over Backend.ListPage, and
// List) against the backends made by newBackend, each once on a default
// Store. Every case expects the order the backend declares
// (driver.Abilities.KeyOrder). A backend's test file calls it next to Run:
//
//	func TestPaging(t *testing.T) { storetest.RunPaging(t, newBackend) }
func RunPaging(t *testing.T, newBackend NewBackend) {
	t.Helper()
	for _, tc := range pagingTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, etagstore.New[Page](newBackend(t), nil))
		})
	}
	// The bounded listing of versions, in the same order as the pages.
	t.Run("VersionsBetween", func(t *testing.T) { runVersionsBetween(t, newBackend) })
}

// createMany creates a document titled with its key under each key, from
// 8 goroutines.
func createMany(t *testing.T, s *etagstore.Store[Page], keys []string) {
	t.Helper()
	ctx := t.Context()
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range work {
				if _, err := s.Create(ctx, k, Page{Title: k}); err != nil {
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

func numbered(format string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(format, i)
	}
	return keys
}

// walk pages through prefix with limit and returns the pages' keys. It
// checks what holds of every page: at most limit documents, each decoded
// (Title is its key), in the backend's declared key order
// (Store.CompareKeys), and a Next on each page but the last.
func walk(t *testing.T, s *etagstore.Store[Page], prefix string, limit int, between func(last string)) [][]string {
	t.Helper()
	var pages [][]string
	token, last := "", ""
	for {
		p, err := s.Page(t.Context(), prefix, limit, token)
		if err != nil {
			t.Fatalf("Page(%q, %d) #%d: %v", prefix, limit, len(pages)+1, err)
		}
		if len(p.Docs) > limit {
			t.Fatalf("Page(%q, %d) #%d holds %d documents", prefix, limit, len(pages)+1, len(p.Docs))
		}
		var keys []string
		for _, d := range p.Docs {
			if d.Value.Title != d.Key || d.ETag == "" {
				t.Fatalf("Page(%q, %d): document %q decoded as %+v with ETag %q", prefix, limit, d.Key, d.Value, d.ETag)
			}
			if last != "" && s.CompareKeys(d.Key, last) <= 0 {
				t.Fatalf("Page(%q, %d) #%d: %q came after %q", prefix, limit, len(pages)+1, d.Key, last)
			}
			last = d.Key
			keys = append(keys, d.Key)
		}
		pages = append(pages, keys)
		if p.Next == "" {
			return pages
		}
		if len(pages) > 100000 {
			t.Fatalf("Page(%q, %d): no end after %d pages", prefix, limit, len(pages))
		}
		if between != nil && len(keys) > 0 {
			between(keys[len(keys)-1])
		}
		token = p.Next
	}
}

// wantPages checks a walk of a listing that did not change: every page but
// the last is full, the last is not empty (unless it is the only one), and
// together they hold want in order.
func wantPages(t *testing.T, pages [][]string, limit int, want []string) {
	t.Helper()
	if n := max(1, (len(want)+limit-1)/limit); len(pages) != n {
		t.Errorf("%d documents in pages of %d came in %d pages, want %d", len(want), limit, len(pages), n)
	}
	for i, p := range pages[:len(pages)-1] {
		if len(p) != limit {
			t.Errorf("page %d of %d holds %d documents, want %d", i+1, len(pages), len(p), limit)
		}
	}
	if got := slices.Concat(pages...); !slices.Equal(got, want) {
		t.Errorf("pages of %d hold %d keys %+q…, want %d keys %+q…", limit, len(got), got[:min(len(got), 8)], len(want), want[:min(len(want), 8)])
	}
}

// testPageSizes: 0, 1, limit−1, limit and limit+1 documents come in the
// right pages, the last one with an empty Next, and no empty page after a
// full one.
func testPageSizes(t *testing.T, s *etagstore.Store[Page]) {
	const limit = 4
	sizes := []int{0, 1, limit - 1, limit, limit + 1, 2 * limit, 2*limit + 1}
	var all []string
	for _, n := range sizes {
		all = append(all, numbered(fmt.Sprintf("n%d-%%02d", n), n)...)
	}
	createMany(t, s, all)
	for _, n := range sizes {
		prefix := fmt.Sprintf("n%d-", n)
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			wantPages(t, walk(t, s, prefix, limit, nil), limit, numbered(prefix+"%02d", n))
		})
	}
	slices.SortFunc(all, s.CompareKeys)
	wantPages(t, walk(t, s, "", 7, nil), 7, all)
}

// testPagePrefixes: a page holds exactly the keys with its prefix, and a
// token works only with the prefix it came from.
func testPagePrefixes(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	createMany(t, s, []string{"a", "a-1", "a-2", "ab-1", "ab-2", "b-1", "b-2", "b"})
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"a", []string{"a", "a-1", "a-2", "ab-1", "ab-2"}},
		{"a-", []string{"a-1", "a-2"}},
		{"ab", []string{"ab-1", "ab-2"}},
		{"b", []string{"b", "b-1", "b-2"}},
		{"c", nil},
		{"", []string{"a", "a-1", "a-2", "ab-1", "ab-2", "b", "b-1", "b-2"}},
	} {
		for _, limit := range []int{1, 2, 5} {
			wantPages(t, walk(t, s, tc.prefix, limit, nil), limit, tc.want)
		}
	}
	p, err := s.Page(ctx, "a", 2, "")
	if err != nil || p.Next == "" {
		t.Fatalf("Page(a, 2) = %+v, %v; want a Next", p, err)
	}
	for _, other := range []string{"ab", "a-", "", "b", "A"} {
		if _, err := s.Page(ctx, other, 2, p.Next); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Page(%q) with a token of prefix \"a\" = %v, want ErrInvalidInput", other, err)
		}
	}
	if q, err := s.Page(ctx, "a", 2, p.Next); err != nil || len(q.Docs) != 2 || q.Docs[0].Key != "a-2" {
		t.Errorf("Page(a, 2, Next) = %+v, %v; want a-2, ab-1", q, err)
	}
}

// testPageUnicodeOrder: pages follow UTF-16 code unit order, and resuming
// after a key with a character above U+FFFF neither skips nor repeats.
func testPageUnicodeOrder(t *testing.T, s *etagstore.Store[Page]) {
	createMany(t, s, []string{"k\uFFFD", "k😀z", "kz", "k\uD7FFx", "k😀", "k\uD7FF", "k\u00e9", "k😁"})
	want := []string{"kz", "k\u00e9", "k\uD7FF", "k\uD7FFx", "k😀", "k😀z", "k😁", "k\uFFFD"}
	for _, limit := range []int{1, 2, 3} {
		wantPages(t, walk(t, s, "k", limit, nil), limit, want)
	}
	wantPages(t, walk(t, s, "k😀", 1, nil), 1, []string{"k😀", "k😀z"})
}

// testPageInvalid: a limit out of range, and a token altered in any way,
// match ErrInvalidInput.
func testPageInvalid(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	createMany(t, s, []string{"p-1", "p-2", "p-3"})
	for _, limit := range []int{0, -1, driver.MaxPageLimit + 1} {
		if _, err := s.Page(ctx, "p-", limit, ""); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Page(limit %d) = %v, want ErrInvalidInput", limit, err)
		}
	}
	if p, err := s.Page(ctx, "p-", driver.MaxPageLimit, ""); err != nil || len(p.Docs) != 3 || p.Next != "" {
		t.Errorf("Page(limit MaxPageLimit) = %+v, %v; want 3 documents and no Next", p, err)
	}
	p, err := s.Page(ctx, "p-", 1, "")
	if err != nil || p.Next == "" {
		t.Fatalf("Page(p-, 1) = %+v, %v; want a Next", p, err)
	}
	tok := p.Next
	bad := []string{
		tok[:len(tok)-1], tok + "A", "A" + tok, tok + "==", tok[1:], strings.ToUpper(tok),
		"x", "not a token", "%%%", strings.Repeat("A", 1<<16),
	}
	for i := range tok { // every single character changed
		c := byte('A')
		if tok[i] == 'A' {
			c = 'B'
		}
		bad = append(bad, tok[:i]+string(c)+tok[i+1:])
	}
	for _, b := range bad {
		if b == tok {
			continue
		}
		if _, err := s.Page(ctx, "p-", 1, b); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Page with token %.40q (altered from %q) = %v, want ErrInvalidInput", b, tok, err)
		}
	}
	// The genuine token still works, also after its key was deleted.
	if err := s.Delete(ctx, p.Docs[0].Key, etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	if q, err := s.Page(ctx, "p-", 5, tok); err != nil || len(q.Docs) != 2 || q.Docs[0].Key != "p-2" || q.Next != "" {
		t.Errorf("Page(p-, 5, Next) after deleting %q = %+v, %v; want p-2, p-3", p.Docs[0].Key, q, err)
	}
}

// testPageConcurrentChanges: documents added and deleted between and
// during the calls of a walk never make a document appear twice or out of
// order; every document present throughout appears, and so does every
// document added ahead of the page last read.
func testPageConcurrentChanges(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	key := func(i int) string { return fmt.Sprintf("c-%05d", i) }
	const n = 240
	var initial []string
	stable := map[string]bool{}
	var victims []int // indexes of documents the walk deletes
	for i := range n {
		initial = append(initial, key(10*i))
		if i%3 == 0 {
			victims = append(victims, 10*i)
		} else {
			stable[key(10*i)] = true
		}
	}
	createMany(t, s, initial)

	// In the background, documents come and go between the initial ones.
	stop := make(chan struct{})
	var churn sync.WaitGroup
	stopChurn := sync.OnceFunc(func() { close(stop); churn.Wait() })
	defer stopChurn()
	churn.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := key(10*rand.IntN(n) + 1 + rand.IntN(4))
			if _, err := s.Create(ctx, k, Page{Title: k}); err != nil && !errors.Is(err, etagstore.ErrExists) {
				t.Errorf("churn: Create(%q): %v", k, err)
				return
			}
			if err := s.Delete(ctx, k, etagstore.ETagAny); err != nil && !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("churn: Delete(%q): %v", k, err)
				return
			}
		}
	})

	// Between calls, delete victims ahead of and behind the page last
	// read, and add documents ahead of and behind it.
	added := map[string]bool{}   // added ahead: must appear
	deleted := map[string]bool{} // deleted ahead: must not appear
	between := func(last string) {
		var ahead, behind []int
		for _, v := range victims {
			if s.CompareKeys(key(v), last) > 0 {
				ahead = append(ahead, v)
			} else {
				behind = append(behind, v)
			}
		}
		for _, v := range append(ahead[:min(2, len(ahead))], behind[:min(2, len(behind))]...) {
			if err := s.Delete(ctx, key(v), etagstore.ETagAny); err != nil {
				t.Fatalf("Delete(%q): %v", key(v), err)
			}
			victims = slices.DeleteFunc(victims, func(x int) bool { return x == v })
			if s.CompareKeys(key(v), last) > 0 {
				deleted[key(v)] = true
			}
		}
		for _, k := range []string{last + "-a", last + "-b", "c-0000" + "-" + last} {
			if _, err := s.Create(ctx, k, Page{Title: k}); err != nil {
				t.Fatalf("Create(%q): %v", k, err)
			}
			if s.CompareKeys(k, last) > 0 {
				added[k] = true
			}
		}
	}
	pages := walk(t, s, "c-", 7, between)
	stopChurn()

	seen := map[string]int{}
	var got []string
	for _, p := range pages {
		for _, k := range p {
			seen[k]++
			got = append(got, k)
		}
	}
	if !slices.IsSortedFunc(got, s.CompareKeys) {
		t.Errorf("keys out of order across pages: %+q", got)
	}
	for k, c := range seen {
		if c > 1 {
			t.Errorf("%q appeared %d times", k, c)
		}
		if deleted[k] {
			t.Errorf("%q appeared after it was deleted ahead of the walk", k)
		}
	}
	for k := range stable {
		if seen[k] != 1 {
			t.Errorf("%q, present throughout, appeared %d times", k, seen[k])
		}
	}
	for k := range added {
		if seen[k] != 1 {
			t.Errorf("%q, added ahead of the walk, appeared %d times", k, seen[k])
		}
	}
	if len(deleted) == 0 || len(added) == 0 {
		t.Errorf("the walk of %d pages deleted %d and added %d documents ahead of it; want some of each", len(pages), len(deleted), len(added))
	}
}

// testPageMany: 1000 documents in pages of several sizes.
func testPageMany(t *testing.T, s *etagstore.Store[Page]) {
	keys := numbered("m-%04d", 1000)
	createMany(t, s, keys)
	for _, limit := range []int{1000, 999, 1001, 333, 64} {
		wantPages(t, walk(t, s, "m-", limit, nil), limit, keys)
	}
}

// testPageAboveServiceMax: a limit above a service's largest page (1000
// table entities) still gives full pages.
func testPageAboveServiceMax(t *testing.T, s *etagstore.Store[Page]) {
	keys := numbered("x-%04d", 1100)
	createMany(t, s, keys)
	for _, limit := range []int{1050, driver.MaxPageLimit} {
		wantPages(t, walk(t, s, "x-", limit, nil), limit, keys)
	}
}

// testPageAtMaxKeyLength: a page that ends at a key as long as the backend
// accepts hands out a token that the next Page accepts.
func testPageAtMaxKeyLength(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	b := s.Backend()
	fits := func(n int) bool { return b.ValidateKey("maxkey-"+strings.Repeat("a", n)) == nil }
	lo, hi := 1, 1<<20 // the longest run of 'a' after the prefix that fits
	if !fits(lo) {
		t.Fatalf("the backend refuses a short key: %v", b.ValidateKey("maxkey-a"))
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	first := "maxkey-" + strings.Repeat("a", lo)
	second := "maxkey-" + strings.Repeat("a", lo-1) + "b"
	mustCreate(t, s, first, Page{Title: "first"})
	mustCreate(t, s, second, Page{Title: "second"})
	p, err := s.Page(ctx, "maxkey-", 1, "")
	if err != nil || len(p.Docs) != 1 || p.Docs[0].Key != first || p.Next == "" {
		t.Fatalf("first page at a %d-byte key: %d docs, next %q, %v", len(first), len(p.Docs), p.Next, err)
	}
	p, err = s.Page(ctx, "maxkey-", 1, p.Next)
	if err != nil || len(p.Docs) != 1 || p.Docs[0].Key != second {
		t.Fatalf("the page after a %d-byte key: %+v, %v", len(first), p.Docs, err)
	}
}

// RunKeyOrder runs only the key-order case of RunPaging (PageKeyOrder),
// for a backend whose keys take a shape the other cases' keys do not
// have: a tablestore without Options.Partition, whose keys are
// "PartitionKey/RowKey" and whose declared order is not
// driver.CompareKeys on them.
func RunKeyOrder(t *testing.T, newBackend NewBackend) {
	t.Helper()
	t.Run("PageKeyOrder", func(t *testing.T) {
		testPageKeyOrder(t, etagstore.New[Page](newBackend(t), nil))
	})
}

// orderKeys are the keys of testPageKeyOrder: "P/R" keys whose partitions
// extend one another by characters below '/', where a table's order
// (PartitionKey, then RowKey) and the order of the whole key's UTF-16
// code units part ("a/x" < "a-b/z" in one, "a-b/z" < "a/x" in the other),
// and plain keys, for backends that refuse '/'.
var orderKeys = []string{
	"a/x", "a/y", "a b/w", "a-b/z", "a.b/y", "a-b-c/q", "a-/r", "a!/u", "a0/s", "a.b.c/t", "b/1",
	"k😀/1", "k\uFFFD/1", "k\uD7FF/2",
	"a", "a-b", "a-b-c", "a.b", "a0", "a b", "k😀", "k\uFFFD", "k\uD7FF",
}

// testPageKeyOrder: List and Page yield the keys the backend accepts in
// the order it declares (Store.CompareKeys), for keys where the orders
// backends declare differ, under several prefixes and page sizes; the
// declared order is a total order on them.
func testPageKeyOrder(t *testing.T, s *etagstore.Store[Page]) {
	var keys []string
	for _, k := range orderKeys {
		if driver.CheckKey(k) == nil && s.Backend().ValidateKey(k) == nil {
			keys = append(keys, k)
		}
	}
	if len(keys) < 7 {
		t.Fatalf("the backend accepts only %q of the keys %q", keys, orderKeys)
	}
	checkTotalOrder(t, s.CompareKeys, keys)
	createMany(t, s, keys)
	slices.SortFunc(keys, s.CompareKeys)
	for _, prefix := range []string{"", "a", "a-", "a.b", "a-b", "k", "a/", "k😀"} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		var listed []string
		for d, err := range s.List(t.Context(), prefix) {
			if err != nil {
				t.Fatalf("List(%q): %v", prefix, err)
			}
			listed = append(listed, d.Key)
		}
		if !slices.Equal(listed, want) {
			t.Errorf("List(%q) = %+q, want %+q", prefix, listed, want)
		}
		for _, limit := range []int{1, 2, 3, 100} {
			wantPages(t, walk(t, s, prefix, limit, nil), limit, want)
		}
	}
}

// checkTotalOrder checks that cmp is a total order on keys: -1, 0 or +1,
// 0 only for equal keys, antisymmetric and transitive.
func checkTotalOrder(t *testing.T, cmp func(a, b string) int, keys []string) {
	t.Helper()
	for _, a := range keys {
		for _, b := range keys {
			c := cmp(a, b)
			if c < -1 || c > 1 || (c == 0) != (a == b) || cmp(b, a) != -c {
				t.Fatalf("key order: compare(%+q, %+q) = %d, compare(%+q, %+q) = %d", a, b, c, b, a, cmp(b, a))
			}
			for _, x := range keys {
				if c < 0 && cmp(b, x) < 0 && cmp(a, x) >= 0 {
					t.Fatalf("key order is not transitive: %+q < %+q < %+q but not %+q < %+q", a, b, x, a, x)
				}
			}
		}
	}
}
