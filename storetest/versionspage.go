package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore/driver"
)

// runVersionsPage checks driver.Abilities.VersionsPage, or skips when the
// backend has none: page after page, of several limits, it returns the
// keys, ETags and more of ListPage's pages, and no Data, Meta or Expires;
// a key deleted or rewritten shows as ListPage shows it.
func runVersionsPage(t *testing.T, newBackend NewBackend) {
	b := newBackend(t)
	versions := b.Abilities().VersionsPage
	if versions == nil {
		t.Skipf("%T has no Abilities.VersionsPage", b)
	}
	create(t, b, "vp-a", "vp-b", "vp-c", "vp-d", "vp-e", "vq-other")
	check := func(t *testing.T) {
		for _, limit := range []int{1, 2, 4, 1000} {
			after := ""
			for {
				want, wantMore, err := b.ListPage(t.Context(), "vp-", after, limit)
				if err != nil {
					t.Fatalf("ListPage(vp-, %q, %d): %v", after, limit, err)
				}
				got, more, err := versions(t.Context(), "vp-", after, limit)
				if err != nil {
					t.Fatalf("VersionsPage(vp-, %q, %d): %v", after, limit, err)
				}
				for i := range want {
					want[i] = driver.Item{Key: want[i].Key, ETag: want[i].ETag}
				}
				if diff := cmp.Diff(want, got); diff != "" || more != wantMore {
					t.Fatalf("VersionsPage(vp-, %q, %d) against ListPage (-ListPage +VersionsPage):\n%smore %v, want %v", after, limit, diff, more, wantMore)
				}
				if !more || len(got) == 0 {
					break
				}
				after = got[len(got)-1].Key
			}
		}
	}
	t.Run("Fresh", check)
	it, err := b.Read(t.Context(), "vp-c")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(t.Context(), "vp-c", it.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(t.Context(), "vp-b", driver.Write{Data: []byte(`{"Title":"again"}`), Cond: driver.Cond{Kind: driver.CondNone}}); err != nil {
		t.Fatal(err)
	}
	t.Run("Changed", check)
}
