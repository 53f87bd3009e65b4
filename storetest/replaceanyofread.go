package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// testReplaceAnyOfRead: a Replace with ETagAny of a Doc a read or write returned
// writes the Doc's change onto the version stored when it writes: what
// another writer changed since the Doc's read (a field the Doc's type
// knows, a member it does not) stays, fenced or not, whichever call
// returned the Doc. A Doc built by hand writes the older type alone.
func testReplaceAnyOfRead(t *testing.T, b driver.Backend) {
	for _, tc := range []struct {
		name  string
		fence bool
		doc   func(ctx context.Context, s *etagstore.Store[Older], key string) (etagstore.Doc[Older], error)
	}{
		{"Get", false, func(ctx context.Context, s *etagstore.Store[Older], key string) (etagstore.Doc[Older], error) {
			return s.Get(ctx, key)
		}},
		{"GetFenced", true, func(ctx context.Context, s *etagstore.Store[Older], key string) (etagstore.Doc[Older], error) {
			return s.Get(ctx, key)
		}},
		{"Update", false, func(ctx context.Context, s *etagstore.Store[Older], key string) (etagstore.Doc[Older], error) {
			return s.Update(ctx, key, func(o *Older) error { o.Addr.City = "Nantes"; return nil })
		}},
		{"Page", false, func(ctx context.Context, s *etagstore.Store[Older], key string) (etagstore.Doc[Older], error) {
			p, err := s.Page(ctx, key, 1, "")
			if err != nil || len(p.Docs) == 0 {
				return etagstore.Doc[Older]{}, err
			}
			return p.Docs[0], nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			newer := etagstore.New[Newer](b, nil)
			older := etagstore.New[Older](b, nil)
			key := "any-" + tc.name
			if _, err := newer.Create(ctx, key, newerOnly("a")); err != nil {
				t.Fatal(err)
			}
			d, err := tc.doc(ctx, older, key)
			if err != nil {
				t.Fatal(err)
			}
			// Another writer changes a field the older type knows and one
			// it does not, after the Doc was read.
			theirs, err := newer.Update(ctx, key, func(n *Newer) error { n.Title, n.S = "a2", "x2"; return nil })
			if err != nil {
				t.Fatal(err)
			}
			wctx := ctx
			if tc.fence {
				wctx = etagstore.WithFence(ctx, 1)
			}
			d.ETag = etagstore.ETagAny
			d.Value.N = 42
			if _, err := older.Replace(wctx, d); err != nil {
				t.Fatalf("Replace with ETagAny: %v", err)
			}
			got, err := newer.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			want := theirs.Value
			want.N = 42
			if diff := cmp.Diff(want, got.Value); diff != "" {
				t.Errorf("after the Replace with ETagAny, the other writer's changes and the caller's (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("BuiltByHand", func(t *testing.T) {
		ctx := t.Context()
		newer := etagstore.New[Newer](b, nil)
		older := etagstore.New[Older](b, nil)
		if _, err := newer.Create(ctx, "any-hand", newerOnly("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := older.Replace(ctx, etagstore.Doc[Older]{Key: "any-hand", ETag: etagstore.ETagAny, Value: Older{Title: "h", N: 7}}); err != nil {
			t.Fatal(err)
		}
		got, err := newer.Get(ctx, "any-hand")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Newer{Title: "h", N: 7}, got.Value); diff != "" {
			t.Errorf("a Doc built by hand writes the older type alone (-want +got):\n%s", diff)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		ctx := t.Context()
		older := etagstore.New[Older](b, nil)
		d, err := older.Create(ctx, "any-gone", Older{Title: "g"})
		if err != nil {
			t.Fatal(err)
		}
		if err := older.Delete(ctx, "any-gone", d.ETag); err != nil {
			t.Fatal(err)
		}
		d.ETag = etagstore.ETagAny
		_, err = older.Replace(ctx, d)
		if !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("Replace with ETagAny of a deleted document = %v, want ErrNotFound", err)
		}
		wantOneSentinel(t, err)
	})
}
