package memstore_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// Keys starting with U+FFFF are reserved: ValidateKey refuses them, the
// entries Entries.Key makes start with it, and a listing of a prefix that
// is not reserved steps over them to the keys after them (here a key of
// invalid UTF-8, which only a caller of the Backend can write).
func TestReservedKeys(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	e := b.Abilities().Entries
	if e == nil {
		t.Fatal("memstore declares no Entries")
	}
	entry := e.Key("", "u.x")
	for _, key := range []string{"\uffff", "\uffffa", entry} {
		if err := b.ValidateKey(key); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("ValidateKey(%+q) = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, key := range []string{"a", "\ufffe", "\U0010ffff", "a\uffff"} {
		if err := b.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%+q) = %v, want nil", key, err)
		}
	}
	if scope, err := e.Scope(entry); scope != "" || err != nil {
		t.Errorf("Scope(%+q) = %q, %v; want \"\", nil", entry, scope, err)
	}
	if scope, err := e.Scope("any/value #?\x00"); scope != "" || err != nil {
		t.Errorf("Scope of a value = %q, %v; want \"\", nil: one scope", scope, err)
	}
	for _, key := range []string{"a", "\ufffe", entry, "\xff"} {
		if _, err := b.Write(ctx, key, driver.Write{Data: []byte(`{}`), Cond: driver.Cond{Kind: driver.CondCreate}}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(prefix string) []string {
		var keys []string
		for it, err := range b.List(ctx, prefix) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, it.Key)
		}
		return keys
	}
	page := func(prefix, after string, limit int) []string {
		items, _, err := b.ListPage(ctx, prefix, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		return keys
	}
	for _, c := range []struct {
		got, want []string
		what      string
	}{
		{list(""), []string{"a", "\ufffe", "\xff"}, `List("")`},
		{page("", "", 10), []string{"a", "\ufffe", "\xff"}, `ListPage("", "", 10)`},
		{page("", "\ufffe", 1), []string{"\xff"}, `ListPage("", "\ufffe", 1)`},
		{list("\xef\xbf"), []string{"\ufffe"}, `List("\xef\xbf")`},
		{list("\uffff"), []string{entry}, `List("\uffff")`},
		{list(e.Key("", "u.")), []string{entry}, `List(Key("", "u."))`},
		{list(e.Key("", "v.")), nil, `List(Key("", "v."))`},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %+q, want %+q", c.what, c.got, c.want)
		}
	}
}
