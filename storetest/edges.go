package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
)

// testMalformedETag: an ETag the backend never issued (garbage, or another
// backend's form) cannot match any version. A Replace or Delete holding one
// is a conflict with the stored document, or ErrNotFound when there is
// none — a definite answer, never an unknown outcome.
func testMalformedETag(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	d := mustCreate(t, s, "p", Page{Title: "v1"})
	for _, etag := range []etagstore.ETag{"garbage", `"0x8DEADBEEF"`, `W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`, `W/"datetime'garbage'"`, `"Z2FyYmFnZQ"`} {
		_, err := s.Replace(ctx, etagstore.Doc[Page]{Key: "p", Value: Page{Title: "mine"}, ETag: etag})
		wantConflict(t, err, d)
		wantConflict(t, s.Delete(ctx, "p", etag), d)
		if _, err := s.Replace(ctx, etagstore.Doc[Page]{Key: "missing", ETag: etag}); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Replace(missing, %s) = %v, want ErrNotFound", etag, err)
		}
		if err := s.Delete(ctx, "missing", etag); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Delete(missing, %s) = %v, want ErrNotFound", etag, err)
		}
	}
	wantStored(t, s, d)
}

// RunMissingResource checks a backend whose table or container does not
// exist: every operation fails at once with ErrStorageNotFound, never
// ErrNotFound (no document is missing: the storage is), and its message
// names what is missing; a definite answer that is not retried and never
// an unknown outcome. newBackend returns such a backend.
func RunMissingResource(t *testing.T, newBackend NewBackend, missing string) {
	b := newBackend(t)
	s := etagstore.New[Page](b, nil)
	ctx := t.Context()
	errs := map[string]error{}
	_, errs["Page"] = s.Page(ctx, "", 10, "")
	_, errs["Save"] = s.Save(ctx, etagstore.Doc[Page]{Key: "k", ETag: etagstore.ETagAny}, Page{N: 1}, nil)
	if b.Abilities().Commit != nil {
		_, errs["Transact"] = s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
			p, err := tx.Get("k")
			if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
				return err
			}
			p.N++
			return tx.Put("k", p)
		})
	}
	_, errs["Get"] = s.Get(ctx, "k")
	_, errs["Create"] = s.Create(ctx, "k", Page{})
	_, errs["Upsert"] = s.Upsert(ctx, "k", Page{})
	_, errs["Replace"] = s.Replace(ctx, etagstore.Doc[Page]{Key: "k", ETag: etagstore.ETagAny})
	_, errs["Update"] = s.Update(ctx, "k", func(p *Page) error { p.N++; return nil })
	_, errs["Update(CreateIfMissing)"] = s.Update(ctx, "k", func(p *Page) error { p.N++; return nil }, etagstore.CreateIfMissing())
	errs["Delete"] = s.Delete(ctx, "k", etagstore.ETagAny)
	for _, err := range s.List(ctx, "") {
		errs["List"] = err
	}
	if readMany := b.Abilities().ReadMany; readMany != nil {
		_, errs["ReadMany"] = readMany(ctx, []string{"k", "l"})
	}
	for op, err := range errs {
		if !errors.Is(err, etagstore.ErrStorageNotFound) {
			t.Errorf("%s on a missing %s = %v, want ErrStorageNotFound", op, missing, err)
			continue
		}
		wantOneSentinel(t, err)
		if !strings.Contains(strings.ToLower(err.Error()), missing+" does not exist") {
			t.Errorf("%s: %q does not say the %s is missing", op, err, missing)
		}
	}
}

// testListUnicodeOrder: List yields keys in UTF-16 code unit order (the
// services' order, in which characters above U+FFFF sort before
// U+E000–U+FFFF), and a prefix ending in any character selects exactly the
// keys that start with it.
func testListUnicodeOrder(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	keys := []string{"k\uFFFD", "k😀z", "kz", "k\uD7FFx", "k😀", "k\uD7FF", "k\u00e9"}
	for _, k := range keys {
		mustCreate(t, s, k, Page{Title: k})
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"k", []string{"kz", "k\u00e9", "k\uD7FF", "k\uD7FFx", "k😀", "k😀z", "k\uFFFD"}},
		{"k\uD7FF", []string{"k\uD7FF", "k\uD7FFx"}},
		{"k😀", []string{"k😀", "k😀z"}},
		{"k\uFFFD", []string{"k\uFFFD"}},
		{"k\u00e9", []string{"k\u00e9"}},
	} {
		var got []string
		for d, err := range s.List(ctx, tc.prefix) {
			if err != nil {
				t.Fatalf("List(%+q): %v", tc.prefix, err)
			}
			got = append(got, d.Key)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%+q) = %+q, want %+q", tc.prefix, got, tc.want)
		}
	}
}
