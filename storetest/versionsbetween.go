package storetest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/etagstore/etagstore/driver"
)

// runVersionsBetween checks driver.Abilities.VersionsBetween, or skips
// when the backend has none: for every pair of bounds among the keys
// stored, between them, before and after them all, and "", it lists the
// keys and ETags that ListPage lists after the first bound and up to the
// second, and no Data, Meta or Expires; never an index entry; a key
// deleted or rewritten shows as ListPage shows it; a range of more than
// a service page (1,000 on tables) comes whole.
func runVersionsBetween(t *testing.T, newBackend NewBackend) {
	b := newBackend(t)
	a := b.Abilities()
	between := a.VersionsBetween
	if between == nil {
		t.Skipf("%T has no Abilities.VersionsBetween", b)
	}
	order := a.KeyOrder()
	create(t, b, "vb-a", "vb-b", "vb-c", "vb-d", "vb-e", "vc-z")
	if a.Entries != nil {
		if scope, err := a.Entries.Scope("vb-c"); err == nil { // not under KeySuffix
			mustCommit(t, b, driver.Action{Key: entryKeyOf(b, scope, "vb.t.x"), Write: putEntry(condCreate, "vb-c", "x")})
		}
	}
	// want is what ListPage lists after after and up to through.
	want := func(t *testing.T, after, through string) []driver.Item {
		var out []driver.Item
		for through != "" {
			items, more, err := b.ListPage(t.Context(), "", after, 1000)
			if err != nil {
				t.Fatalf("ListPage(%q): %v", after, err)
			}
			for _, it := range items {
				if order(it.Key, through) > 0 {
					return out
				}
				out = append(out, driver.Item{Key: it.Key, ETag: it.ETag})
			}
			if !more {
				break
			}
			after = items[len(items)-1].Key
		}
		return out
	}
	check := func(t *testing.T, bounds []string) {
		for _, after := range bounds {
			for _, through := range bounds {
				got, err := between(t.Context(), after, through)
				if err != nil {
					t.Fatalf("VersionsBetween(%q, %q): %v", after, through, err)
				}
				if diff := cmp.Diff(want(t, after, through), got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("VersionsBetween(%q, %q) against ListPage (-ListPage +VersionsBetween):\n%s", after, through, diff)
				}
			}
		}
	}
	bounds := []string{"", "vb-a", "vb-b", "vb-b0", "vb-c", "vb-e", "vc-z", "zzz"}
	t.Run("Fresh", func(t *testing.T) { check(t, bounds) })
	it, err := b.Read(t.Context(), "vb-c")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(t.Context(), "vb-c", it.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(t.Context(), "vb-b", driver.Write{Data: []byte(`{"Title":"again"}`), Cond: driver.Cond{Kind: driver.CondNone}}); err != nil {
		t.Fatal(err)
	}
	t.Run("Changed", func(t *testing.T) { check(t, bounds) })
	t.Run("Many", func(t *testing.T) {
		keys := make([]string, 1005)
		for i := range keys {
			keys[i] = fmt.Sprintf("vm-%04d", i)
		}
		create(t, b, keys...)
		got, err := between(t.Context(), "vc-z", "vm-1004")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(keys) || got[0].Key != keys[0] || got[len(got)-1].Key != keys[len(keys)-1] {
			t.Fatalf("VersionsBetween over %d keys: %d, want all", len(keys), len(got))
		}
		check(t, []string{"vc-z", "vm-0998", "vm-1004"})
	})
}
