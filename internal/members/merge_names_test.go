package members

import (
	"encoding/json"
	"reflect"
	"testing"
)

// check: decode stored into a fresh T, encode (base), mutate, encode (mine),
// Merge, decode the merge into a fresh T: it must equal the mutated value.
func check[T any](t *testing.T, stored string, mutate func(*T)) {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(stored), &v); err != nil {
		t.Fatal(err)
	}
	base, _ := json.Marshal(v)
	mutate(&v)
	mine, _ := json.Marshal(v)
	merged := Merge([]byte(stored), base, mine)
	var got T
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatalf("merged %s: %v", merged, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Errorf("stored %s\nbase   %s\nmine   %s\nmerged %s\ndecodes %#v, want %#v", stored, base, mine, merged, got, v)
	}
}

// TestMergeMapKeysMatchExactly: a map key renamed only in case ("a" to
// "A"), value unchanged, is stored renamed: base and mine are matched by
// exact name, never folded.
func TestMergeMapKeysMatchExactly(t *testing.T) {
	type T struct {
		M map[string]int `json:"m"`
	}
	// another program wrote the keys in another order: stored != base
	check(t, `{"m":{"b":2,"a":1}}`, func(v *T) { delete(v.M, "a"); v.M["A"] = 1 })
}

// Same at the top level (T a map).
func TestMergeTopLevelMapKeysMatchExactly(t *testing.T) {
	check(t, `{"b":2,"a":1}`, func(v *map[string]int) { delete(*v, "a"); (*v)["A"] = 1 })
}

// Map values with members T does not know (a newer version's): realistic stored != base.
func TestMergeMapOfStructsKeysMatchExactly(t *testing.T) {
	type Item struct {
		N int `json:"n"`
	}
	type T struct {
		M map[string]Item `json:"m"`
	}
	check(t, `{"m":{"x":{"n":1,"new":true}}}`, func(v *T) { v.M["X"] = v.M["x"]; delete(v.M, "x") })
}

// TestMergeDropsStoredTwinOfOmitemptyMember: of duplicate names
// encoding/json keeps the last; an omitempty field whose last stored
// member is zero is absent from base, and setting it drops the twin.
func TestMergeDropsStoredTwinOfOmitemptyMember(t *testing.T) {
	type T struct {
		N int `json:"n,omitempty"`
	}
	check(t, `{"n":3,"n":0}`, func(v *T) { v.N = 3 })
}

// TestMergeDropsFoldedTwinOfOmitemptyMember: a case-variant twin of an
// omitempty field, zero, is dropped when the type sets the field.
func TestMergeDropsFoldedTwinOfOmitemptyMember(t *testing.T) {
	type T struct {
		N int `json:"n,omitempty"`
	}
	check(t, `{"n":0,"N":0}`, func(v *T) { v.N = 7 })
}
