package etagstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf16"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"

	"github.com/etagstore/etagstore/driver"
)

// countingBackend counts the ListPage calls that reach the backend.
type countingBackend struct {
	*memstore.Backend
	calls atomic.Int64
}

func (c *countingBackend) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	c.calls.Add(1)
	return c.Backend.ListPage(ctx, prefix, after, limit)
}

type note struct{ Text string }

func newPagedStore(t *testing.T, keys ...string) (*etagstore.Store[note], *countingBackend) {
	t.Helper()
	b := &countingBackend{Backend: memstore.New(nil)}
	s := etagstore.New[note](b, nil)
	for _, k := range keys {
		if _, err := s.Create(t.Context(), k, note{k}); err != nil {
			t.Fatal(err)
		}
	}
	return s, b
}

// token builds a page token the way the package does (the format is
// stable: tokens handed out by an older process must keep working).
func token(scope, after string) string {
	h := sha256.New()
	h.Write([]byte{1, byte(len(scope))}) // len < 128: one uvarint byte
	h.Write([]byte(scope))
	h.Write([]byte(after))
	b := append(append([]byte{1}, after...), h.Sum(nil)[:8]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// version2 returns tok with its version byte set to 2.
func version2(tok string) string {
	b, _ := base64.RawURLEncoding.DecodeString(tok)
	b[0] = 2
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestPageTokenFormat(t *testing.T) {
	ctx := t.Context()
	s, _ := newPagedStore(t, "p-1", "p-2", "p-3", "q-1")
	p, err := s.Page(ctx, "p-", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := token("list\x00p-", "p-1"); p.Next != want {
		t.Fatalf("Next = %q, want %q", p.Next, want)
	}
	// A token of another Store (another process) on the same data works:
	// tokens are stateless.
	other := etagstore.New[note](s.Backend(), nil)
	if q, err := other.Page(ctx, "p-", 5, token("list\x00p-", "p-2")); err != nil || len(q.Docs) != 1 || q.Docs[0].Key != "p-3" {
		t.Fatalf("Page with a token made elsewhere = %+v, %v; want p-3", q, err)
	}
}

func TestPageInvalidSendsNothing(t *testing.T) {
	ctx := t.Context()
	s, b := newPagedStore(t, "p-1", "p-2", "q-1")
	for _, tc := range []struct {
		name, prefix, token string
		limit               int
	}{
		{"limit 0", "p-", "", 0},
		{"limit -1", "p-", "", -1},
		{"limit above MaxPageLimit", "p-", "", driver.MaxPageLimit + 1},
		{"garbage", "p-", "garbage!", 1},
		{"another prefix", "q-", token("list\x00p-", "p-1"), 1},
		{"another scope", "p-", token("tablestore.query\x00p-", "p-1"), 1},
		// Checksums are keyless, so these are forgeable; the key is still
		// checked against the prefix and the backend's key rules.
		{"key outside the prefix", "p-", token("list\x00p-", "q-1"), 1},
		{"key the backend refuses", "", token("list\x00", strings.Repeat("k", 2000)), 1},
		{"empty key", "p-", token("list\x00p-", ""), 1},
		{"bad UTF-8", "p-", token("list\x00p-", "p-\xff"), 1},
		{"version 2", "p-", version2(token("list\x00p-", "p-1")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.calls.Load()
			if _, err := s.Page(ctx, tc.prefix, tc.limit, tc.token); !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("Page = %v, want ErrInvalidInput", err)
			}
			if n := b.calls.Load() - before; n != 0 {
				t.Errorf("%d ListPage calls reached the backend, want 0", n)
			}
		})
	}
}

func TestPageCanceled(t *testing.T) {
	s, b := newPagedStore(t, "p-1")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Page(ctx, "p-", 1, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Page(canceled) = %v, want context.Canceled", err)
	}
	if b.calls.Load() != 0 {
		t.Errorf("a canceled Page reached the backend")
	}
}

// A backend that breaks the ListPage contract gets an error, never a
// silent end of the listing.
type lyingBackend struct{ *memstore.Backend }

func (lyingBackend) ListPage(context.Context, string, string, int) ([]driver.Item, bool, error) {
	return nil, true, nil
}

func TestPageBackendContract(t *testing.T) {
	s := etagstore.New[note](lyingBackend{memstore.New(nil)}, nil)
	if p, err := s.Page(t.Context(), "", 5, ""); err == nil {
		t.Errorf("Page over a backend reporting more after nothing = %+v, want an error", p)
	}
}

func TestCompareKeys(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"a", "", 1},
		{"a", "b", -1},
		{"ab", "a", 1},
		{"\uFFFD", "😀", 1},          // U+FFFD is above the surrogates U+D83D…
		{"\uE000", "\U0010FFFF", 1}, // the private use area is above every pair
		{"\uD7FF", "😀", -1},
		{"😀", "😁", -1},
		{"é", "z", 1},
	} {
		if got := driver.CompareKeys(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareKeys(%+q, %+q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	// Against the definition, on random strings.
	alphabet := []rune{'a', 'z', 'é', '\uD7FF', '\uE000', '\uFFFD', '😀', '\U0010FFFF', 0x10000}
	keys := make([]string, 500)
	for i := range keys {
		r := make([]rune, rand.IntN(4))
		for j := range r {
			r[j] = alphabet[rand.IntN(len(alphabet))]
		}
		keys[i] = string(r)
	}
	for _, a := range keys[:50] {
		for _, b := range keys {
			if got, want := driver.CompareKeys(a, b), slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b))); got != want {
				t.Fatalf("CompareKeys(%+q, %+q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func ExampleStore_Page() {
	ctx := context.Background()
	s := etagstore.New[note](memstore.New(nil), nil)
	for _, k := range []string{"post-1", "post-2", "post-3", "draft-1"} {
		if _, err := s.Create(ctx, k, note{"text of " + k}); err != nil {
			panic(err)
		}
	}
	// A handler serves one page per request; the token comes back as the
	// "next" link's query parameter.
	token := ""
	for {
		page, err := s.Page(ctx, "post-", 2, token)
		if err != nil {
			panic(err) // errors.Is(err, etagstore.ErrInvalidInput): a bad link, answer 400
		}
		for _, d := range page.Docs {
			fmt.Println(d.Key, d.Value.Text)
		}
		if page.Next == "" {
			break
		}
		fmt.Println("-- next page")
		token = page.Next
	}
	// Output:
	// post-1 text of post-1
	// post-2 text of post-2
	// -- next page
	// post-3 text of post-3
}

// reversedBackend declares its own key order: the reverse of
// driver.CompareKeys.
type reversedBackend struct{ *memstore.Backend }

func (r reversedBackend) Abilities() driver.Abilities {
	a := r.Backend.Abilities()
	a.CompareKeys = func(x, y string) int { return driver.CompareKeys(y, x) }
	return a
}

// Store.CompareKeys is the order the backend declares, driver.CompareKeys
// when it declares none.
func TestStoreCompareKeys(t *testing.T) {
	plain := etagstore.New[note](memstore.New(nil), nil)
	reversed := etagstore.New[note](reversedBackend{memstore.New(nil)}, nil)
	for _, tc := range [][2]string{{"a", "b"}, {"a-b/x", "a/y"}, {"k😀", "k\uFFFD"}, {"x", "x"}} {
		a, b := tc[0], tc[1]
		if got, want := plain.CompareKeys(a, b), driver.CompareKeys(a, b); got != want {
			t.Errorf("memstore: CompareKeys(%+q, %+q) = %d, want %d", a, b, got, want)
		}
		if got, want := reversed.CompareKeys(a, b), driver.CompareKeys(b, a); got != want {
			t.Errorf("declared order: CompareKeys(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
}
