package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// entriesCases are the cases of RunEntries. Each gets the group's
// backend, whose Abilities.Entries and Commit are set, and documents of
// boards of its own and entry names starting with its own letters (on a
// backend of one commit scope every case's entries share it).
var entriesCases = []struct {
	name string
	fn   func(t *testing.T, b driver.Backend)
}{
	{"Keys", testEntryKeys},
	{"CreateWithDocument", testEntryCreateWithDocument},
	{"NotListed", testEntryNotListed},
	{"ListByPrefix", testEntryListByPrefix},
	{"Delete", testEntryDelete},
	{"UpsertAndConditions", testEntryUpsertAndConditions},
	{"Scopes", testEntryScopes},
}

// RunEntries checks a backend's index entries (driver.Abilities.Entries)
// through the driver.Backend itself: keys no user key equals, committed
// with documents in one atomic request, read, listed under their own
// prefixes and never under a user's. Run runs it; a backend's tests run
// it again for options that change the commit scopes (tablestore
// without Options.Partition: one scope per partition). A backend without
// Entries skips it.
func RunEntries(t *testing.T, newBackend NewBackend) {
	b := newBackend(t)
	a := b.Abilities()
	if a.Entries == nil {
		t.Skipf("%T keeps no index entries (Abilities.Entries is nil)", b)
	}
	if a.Entries.Scope == nil || a.Entries.Key == nil || a.Commit == nil {
		t.Fatalf("%T declares Entries without Scope, Key or Commit (Scope %v, Key %v, Commit %v)", b, a.Entries.Scope != nil, a.Entries.Key != nil, a.Commit != nil)
	}
	for _, tc := range entriesCases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// entryData is the Data of the suite's entries: a JSON object of string
// members, as the Store writes them.
type entryData struct {
	Doc   string
	Value string
}

// docKey is the key of card in board: "board/card" where b accepts it
// (a table without Options.Partition: board is the partition), else
// "board-card".
func docKey(t *testing.T, b driver.Backend, board, card string) string {
	t.Helper()
	key := board + "/" + card
	if b.ValidateKey(key) == nil {
		return key
	}
	key = board + "-" + card
	if err := b.ValidateKey(key); err != nil {
		t.Fatalf("ValidateKey(%q): %v", key, err)
	}
	return key
}

// scopeOf is Entries.Scope(key), which must succeed and be a prefix of key.
func scopeOf(t *testing.T, b driver.Backend, key string) string {
	t.Helper()
	scope, err := b.Abilities().Entries.Scope(key)
	if err != nil {
		t.Fatalf("Scope(%q): %v", key, err)
	}
	if !strings.HasPrefix(key, scope) {
		t.Fatalf("Scope(%q) = %q, not a prefix of the key", key, scope)
	}
	return scope
}

// entryKeyOf is Entries.Key(scope, name).
func entryKeyOf(b driver.Backend, scope, name string) string {
	return b.Abilities().Entries.Key(scope, name)
}

// putDoc is the write of a document titled title.
func putDoc(cond driver.Cond, title string) driver.Write {
	data, _ := json.Marshal(Page{Title: title})
	return driver.Write{Data: data, Cond: cond}
}

// putEntry is the write of an entry holding doc and value.
func putEntry(cond driver.Cond, doc, value string) driver.Write {
	data, _ := json.Marshal(map[string]string{"Doc": doc, "Value": value})
	return driver.Write{Data: data, Cond: cond}
}

var (
	condCreate = driver.Cond{Kind: driver.CondCreate}
	condNone   = driver.Cond{Kind: driver.CondNone}
)

// commitOf runs actions as one Commit of b.
func commitOf(t *testing.T, b driver.Backend, actions ...driver.Action) ([]driver.ETag, error) {
	t.Helper()
	a := b.Abilities()
	if a.CheckCommit != nil {
		if err := a.CheckCommit(actions); err != nil {
			return nil, err
		}
	}
	return a.Commit(t.Context(), actions)
}

// mustCommit runs actions as one Commit of b, which must succeed.
func mustCommit(t *testing.T, b driver.Backend, actions ...driver.Action) []driver.ETag {
	t.Helper()
	etags, err := commitOf(t, b, actions...)
	if err != nil {
		t.Fatalf("Commit of %d actions: %v", len(actions), err)
	}
	return etags
}

// wantActionError checks that err is an *driver.ActionError naming
// action index and matching sentinel.
func wantActionError(t *testing.T, err error, index int, sentinel error) {
	t.Helper()
	var ae *driver.ActionError
	if !errors.As(err, &ae) || ae.Index != index || !errors.Is(err, sentinel) {
		t.Fatalf("Commit = %v (%T), want an *driver.ActionError of action %d matching %v", err, err, index, sentinel)
	}
}

// readEntry reads the entry under key and decodes its Data.
func readEntry(t *testing.T, b driver.Backend, key string) (entryData, driver.ETag) {
	t.Helper()
	it, err := b.Read(t.Context(), key)
	if err != nil {
		t.Fatalf("Read of entry %+q: %v", key, err)
	}
	var d entryData
	if err := json.Unmarshal(it.Data, &d); err != nil {
		t.Fatalf("Read of entry %+q: Data %s: %v", key, it.Data, err)
	}
	if it.Key != key || it.ETag == "" {
		t.Fatalf("Read of entry %+q = Key %+q, ETag %q", key, it.Key, it.ETag)
	}
	return d, it.ETag
}

// wantAbsent checks that Read finds no item under key.
func wantAbsent(t *testing.T, b driver.Backend, key string) {
	t.Helper()
	if it, err := b.Read(t.Context(), key); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Read(%+q) = %+v, %v; want ErrNotFound", key, it, err)
	}
}

// listedKeys is the keys List(prefix) yields.
func listedKeys(t *testing.T, b driver.Backend, prefix string) []string {
	t.Helper()
	var keys []string
	for it, err := range b.List(t.Context(), prefix) {
		if err != nil {
			t.Fatalf("List(%+q): %v", prefix, err)
		}
		keys = append(keys, it.Key)
	}
	return keys
}

// pagedKeys is the keys ListPage(prefix) yields, page after page of limit.
func pagedKeys(t *testing.T, b driver.Backend, prefix string, limit int) []string {
	t.Helper()
	var keys []string
	after := ""
	for {
		items, more, err := b.ListPage(t.Context(), prefix, after, limit)
		if err != nil {
			t.Fatalf("ListPage(%+q, %+q, %d): %v", prefix, after, limit, err)
		}
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		if !more || len(items) == 0 {
			return keys
		}
		after = items[len(items)-1].Key
	}
}

// testEntryKeys: Scope is a prefix of a document's key, the same for
// keys of one scope, and of the scope followed by a value of any
// characters; Key makes keys in the scope that ValidateKey refuses,
// distinct per name, a name's prefix giving a key's prefix; ReadMany
// refuses them.
func testEntryKeys(t *testing.T, b driver.Backend) {
	a := b.Abilities()
	doc := docKey(t, b, "ka", "c7")
	scope := scopeOf(t, b, doc)
	if other := scopeOf(t, b, docKey(t, b, "ka", "c8")); other != scope {
		t.Errorf("Scope of two cards of one board = %q and %q, want one scope", scope, other)
	}
	// Only the scope's part is validated: what follows may be an index's
	// value, of any characters.
	if got, err := a.Entries.Scope(scope + "a value/#?\\ ☃ " + strings.Repeat("v", 2000)); got != scope || err != nil {
		t.Errorf("Scope of the scope and a value = %q, %v; want %q", got, err, scope)
	}
	keys := map[string]string{}
	for _, name := range []string{"ka.x", "ka.x.y", "ka.y", "ka.X", "ka_-~.0", strings.Repeat("z", driver.MaxEntryName)} {
		key := a.Entries.Key(scope, name)
		if !strings.HasPrefix(key, scope) {
			t.Errorf("Key(%q, %q) = %+q, not in the scope", scope, name, key)
		}
		if err := b.ValidateKey(key); !errors.Is(err, etagstore.ErrInvalidKey) {
			t.Errorf("ValidateKey(Key(%q, %q)) = %v, want ErrInvalidKey: no user key may equal an entry's", scope, name, err)
		} else {
			wantOneSentinel(t, err)
		}
		if prev, ok := keys[key]; ok {
			t.Errorf("Key(%q, %q) = Key(%q, %q) = %+q", scope, name, scope, prev, key)
		}
		keys[key] = name
		if got, err := a.Entries.Scope(key); err != nil || got != scope {
			t.Errorf("Scope(Key(%q, %q)) = %q, %v; want the scope", scope, name, got, err)
		}
		if a.ReadMany != nil { // entries are read with documents, missing here
			if items, err := a.ReadMany(t.Context(), []string{doc, key}); err != nil || len(items) != 2 || items[1].Key != key || items[1].ETag != "" {
				t.Errorf("ReadMany of a document and an entry key = %+v, %v; want two Items, the entry's missing", items, err)
			}
		}
	}
	if short, long := a.Entries.Key(scope, "ka.x"), a.Entries.Key(scope, "ka.x.y"); !strings.HasPrefix(long, short) {
		t.Errorf("Key of %q = %+q is not a prefix of Key of %q = %+q", "ka.x", short, "ka.x.y", long)
	}
	if short, other := a.Entries.Key(scope, "ka.x"), a.Entries.Key(scope, "ka.y"); strings.HasPrefix(other, short) {
		t.Errorf("Key of %q = %+q is a prefix of Key of %q = %+q", "ka.x", short, "ka.y", other)
	}
}

// testEntryCreateWithDocument: a document and an entry created in one
// Commit both land and read back; a second Commit creating the same entry
// with another document fails on the entry (ErrExists), wherever the
// entry stands in it, and its document does not land.
func testEntryCreateWithDocument(t *testing.T, b driver.Backend) {
	doc, doc2 := docKey(t, b, "cw", "c7"), docKey(t, b, "cw", "c8")
	scope := scopeOf(t, b, doc)
	entry := entryKeyOf(b, scope, "cw.title.ship-it")
	etags := mustCommit(t, b,
		driver.Action{Key: doc, Write: putDoc(condCreate, "Ship it")},
		driver.Action{Key: entry, Write: putEntry(condCreate, doc, "ship it")})
	if it, err := b.Read(t.Context(), doc); err != nil || (etags[0] != "" && it.ETag != etags[0]) {
		t.Fatalf("Read(%q) after the commit = %v, ETag %q; want the document at %q", doc, err, it.ETag, etags[0])
	}
	got, etag := readEntry(t, b, entry)
	if want := (entryData{Doc: doc, Value: "ship it"}); got != want {
		t.Errorf("the entry holds %+v, want %+v", got, want)
	}
	if etags[1] != "" && etag != etags[1] {
		t.Errorf("the entry's ETag is %q, Commit returned %q", etag, etags[1])
	}
	for _, order := range []string{"entry last", "entry first"} {
		actions := []driver.Action{
			{Key: doc2, Write: putDoc(condCreate, "Ship it again")},
			{Key: entry, Write: putEntry(condCreate, doc2, "ship it")},
		}
		index := 1
		if order == "entry first" {
			actions[0], actions[1], index = actions[1], actions[0], 0
		}
		_, err := commitOf(t, b, actions...)
		wantActionError(t, err, index, etagstore.ErrExists)
		wantOneSentinel(t, err)
		wantAbsent(t, b, doc2)
		if got, _ := readEntry(t, b, entry); got.Doc != doc {
			t.Fatalf("%s: the refused commit changed the entry: %+v", order, got)
		}
	}
}

// testEntryNotListed: no listing of a user's prefix, List or ListPage,
// whole or paged, yields an entry (nor a fence record beside it), and
// every one yields the documents.
func testEntryNotListed(t *testing.T, b driver.Backend) {
	doc, gone := docKey(t, b, "nl", "c7"), docKey(t, b, "nl", "c9")
	scope := scopeOf(t, b, doc)
	mustCommit(t, b,
		driver.Action{Key: doc, Write: putDoc(condCreate, "Listed")},
		driver.Action{Key: entryKeyOf(b, scope, "nl.title.listed"), Write: putEntry(condCreate, doc, "listed")},
		driver.Action{Key: entryKeyOf(b, scope, "nl.label.x"), Write: putEntry(condCreate, doc, "x")})
	mustCommit(t, b, driver.Action{Key: gone, Write: putDoc(condCreate, "Gone")})
	if b.Abilities().Tombstones { // a fence record beside the entries, on tables
		mustCommit(t, b, driver.Action{Key: gone, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etagstore.ETagAny), Mode: driver.ModeTombstone, Meta: "f=3"}})
	} else {
		mustCommit(t, b, driver.Action{Key: gone, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etagstore.ETagAny)}})
	}
	prefixes := []string{"", scope, doc[:len(doc)-1], doc}
	for _, prefix := range prefixes {
		for what, keys := range map[string][]string{
			"List":             listedKeys(t, b, prefix),
			"ListPage by 1":    pagedKeys(t, b, prefix, 1),
			"ListPage by 1000": pagedKeys(t, b, prefix, 1000),
		} {
			if !slices.Contains(keys, doc) {
				t.Errorf("%s(%+q) = %+q, without the document %q", what, prefix, keys, doc)
			}
			for _, key := range keys {
				if err := b.ValidateKey(key); err != nil {
					t.Errorf("%s(%+q) yielded %+q, a key ValidateKey refuses (%v): an entry or a record", what, prefix, key, err)
				}
			}
		}
	}
	if keys := listedKeys(t, b, entryKeyOf(b, scope, "nl.")); len(keys) != 2 {
		t.Errorf("List of the entries = %+q, want the two", keys)
	}
}

// testEntryListByPrefix: List and ListPage of a prefix Key made yield
// exactly the entries whose names start with it, in the backend's key
// order, and neither documents nor fence records.
func testEntryListByPrefix(t *testing.T, b driver.Backend) {
	doc, gone := docKey(t, b, "lp", "c7"), docKey(t, b, "lp", "c9")
	scope := scopeOf(t, b, doc)
	names := []string{"lp.x.c", "lp.x", "lp.xa", "lp.x.a", "lp.y.a", "lp.x.b", "lp.x.B"}
	actions := []driver.Action{{Key: doc, Write: putDoc(condCreate, "Listed by prefix")}}
	for _, name := range names {
		actions = append(actions, driver.Action{Key: entryKeyOf(b, scope, name), Write: putEntry(condCreate, doc, name)})
	}
	mustCommit(t, b, actions...)
	mustCommit(t, b, driver.Action{Key: gone, Write: putDoc(condCreate, "Gone")})
	if b.Abilities().Tombstones {
		mustCommit(t, b, driver.Action{Key: gone, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etagstore.ETagAny), Mode: driver.ModeTombstone, Meta: "f=3"}})
	}
	want := func(prefix string) []string {
		var keys []string
		for _, name := range names {
			if strings.HasPrefix(name, prefix) {
				keys = append(keys, entryKeyOf(b, scope, name))
			}
		}
		slices.SortFunc(keys, b.Abilities().KeyOrder())
		return keys
	}
	for _, prefix := range []string{"lp.x.", "lp.x", "lp.", "lp.y", "lp.z"} {
		listing := entryKeyOf(b, scope, prefix)
		w := want(prefix)
		if diff := cmp.Diff(w, listedKeys(t, b, listing)); diff != "" {
			t.Errorf("List(Key(%q, %q)) (-want +got):\n%s", scope, prefix, diff)
		}
		for _, limit := range []int{1, 2, 1000} {
			if diff := cmp.Diff(w, pagedKeys(t, b, listing, limit)); diff != "" {
				t.Errorf("ListPage(Key(%q, %q)) by %d (-want +got):\n%s", scope, prefix, limit, diff)
			}
		}
	}
	// A page of two, then the rest, with the entries' Data.
	listing := entryKeyOf(b, scope, "lp.x.")
	items, more, err := b.ListPage(t.Context(), listing, "", 2)
	if err != nil || len(items) != 2 || !more {
		t.Fatalf("ListPage(Key(%q, \"lp.x.\"), \"\", 2) = %d items, more %v, %v; want 2, more", scope, len(items), more, err)
	}
	var d entryData
	if err := json.Unmarshal(items[0].Data, &d); err != nil || d.Doc != doc {
		t.Errorf("a listed entry's Data %s = %+v, %v; want Doc %q", items[0].Data, d, err, doc)
	}
	rest, more, err := b.ListPage(t.Context(), listing, items[1].Key, 2)
	if err != nil || more || len(rest) != 2 {
		t.Fatalf("ListPage after %+q = %d items, more %v, %v; want the last 2", items[1].Key, len(rest), more, err)
	}
}

// testEntryDelete: an entry deleted with If-Match ETagAny in a Commit,
// together with its document, is gone with it; deleting a missing entry
// fails on it (ErrNotFound) and deleting at a stale ETag (ErrConflict),
// and then nothing else of the Commit lands.
func testEntryDelete(t *testing.T, b driver.Backend) {
	doc, doc2 := docKey(t, b, "dl", "c7"), docKey(t, b, "dl", "c8")
	scope := scopeOf(t, b, doc)
	entry, stale := entryKeyOf(b, scope, "dl.title.a"), entryKeyOf(b, scope, "dl.title.b")
	etags := mustCommit(t, b,
		driver.Action{Key: doc, Write: putDoc(condCreate, "A")},
		driver.Action{Key: entry, Write: putEntry(condCreate, doc, "a")},
		driver.Action{Key: stale, Write: putEntry(condCreate, doc, "b")})
	_, staleETag := readEntry(t, b, stale)
	mustCommit(t, b, driver.Action{Key: stale, Write: putEntry(condNone, doc, "b again")})
	_, err := commitOf(t, b,
		driver.Action{Key: doc2, Write: putDoc(condCreate, "B")},
		driver.Action{Key: stale, Delete: true, Write: driver.Write{Cond: driver.IfMatch(staleETag)}})
	wantActionError(t, err, 1, etagstore.ErrConflict)
	wantAbsent(t, b, doc2)
	readEntry(t, b, stale)

	docETag := driver.ETagAny
	if etags[0] != "" {
		docETag = etags[0]
	}
	mustCommit(t, b,
		driver.Action{Key: doc, Delete: true, Write: driver.Write{Cond: driver.IfMatch(docETag)}},
		driver.Action{Key: entry, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etagstore.ETagAny)}})
	wantAbsent(t, b, doc)
	wantAbsent(t, b, entry)
	_, err = commitOf(t, b,
		driver.Action{Key: doc2, Write: putDoc(condCreate, "B")},
		driver.Action{Key: entry, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etagstore.ETagAny)}})
	wantActionError(t, err, 1, etagstore.ErrNotFound)
	wantOneSentinel(t, err)
	wantAbsent(t, b, doc2)
}

// testEntryUpsertAndConditions: an entry written unconditionally
// (CondNone) is created, then replaced; a write at a stale ETag fails on
// it (ErrConflict) and its document's write does not land; at the current
// ETag it lands; a check of it at its ETag passes, and at a stale one
// fails.
func testEntryUpsertAndConditions(t *testing.T, b driver.Backend) {
	doc := docKey(t, b, "up", "c7")
	scope := scopeOf(t, b, doc)
	entry := entryKeyOf(b, scope, "up.title.a")
	mustCommit(t, b, driver.Action{Key: entry, Write: putEntry(condNone, doc, "one")})
	if got, _ := readEntry(t, b, entry); got.Value != "one" {
		t.Fatalf("after an upsert creating it the entry holds %+v", got)
	}
	mustCommit(t, b, driver.Action{Key: entry, Write: putEntry(condNone, doc, "two")})
	got, etag := readEntry(t, b, entry)
	if got.Value != "two" {
		t.Fatalf("after an upsert replacing it the entry holds %+v", got)
	}
	mustCommit(t, b, driver.Action{Key: entry, Write: putEntry(condNone, doc, "three")})
	_, err := commitOf(t, b,
		driver.Action{Key: doc, Write: putDoc(condCreate, "Up")},
		driver.Action{Key: entry, Write: putEntry(driver.IfMatch(etag), doc, "four")})
	wantActionError(t, err, 1, etagstore.ErrConflict)
	wantAbsent(t, b, doc)
	got, etag = readEntry(t, b, entry)
	if got.Value != "three" {
		t.Fatalf("after a refused write the entry holds %+v, want three", got)
	}
	mustCommit(t, b,
		driver.Action{Key: doc, Write: putDoc(condCreate, "Up")},
		driver.Action{Key: entry, Write: putEntry(driver.IfMatch(etag), doc, "four")})
	got, etag = readEntry(t, b, entry)
	if got.Value != "four" {
		t.Fatalf("after a write at its ETag the entry holds %+v, want four", got)
	}
	mustCommit(t, b,
		driver.Action{Key: doc, Write: putDoc(driver.IfMatch(etagstore.ETagAny), "Up again")},
		driver.Action{Key: entry, Check: true, Write: driver.Write{Cond: driver.IfMatch(etag)}})
	mustCommit(t, b, driver.Action{Key: entry, Write: putEntry(condNone, doc, "five")})
	_, err = commitOf(t, b,
		driver.Action{Key: doc, Write: putDoc(driver.IfMatch(etagstore.ETagAny), "Up, not")},
		driver.Action{Key: entry, Check: true, Write: driver.Write{Cond: driver.IfMatch(etag)}})
	wantActionError(t, err, 1, etagstore.ErrConflict)
	if got, _ := readEntry(t, b, entry); got.Value != "five" {
		t.Fatalf("after a check the entry holds %+v, want five", got)
	}
}

// testEntryScopes: documents of two commit scopes (on tables without
// Options.Partition: two partitions) have entries of the same name that
// are distinct items, listed apart, and a Commit may not mix a scope's
// entry with another scope's document. On a backend of one scope the two
// documents' scopes must be the same.
func testEntryScopes(t *testing.T, b driver.Backend) {
	doc1, doc2 := docKey(t, b, "sa", "c7"), docKey(t, b, "sb", "c7")
	scope1, scope2 := scopeOf(t, b, doc1), scopeOf(t, b, doc2)
	if scope1 == scope2 {
		t.Logf("%T holds %q and %q in one commit scope %q: nothing more to check", b, doc1, doc2, scope1)
		return
	}
	e1, e2 := entryKeyOf(b, scope1, "sc.title.same"), entryKeyOf(b, scope2, "sc.title.same")
	if e1 == e2 {
		t.Fatalf("Key of one name in scopes %q and %q = %+q, the same key", scope1, scope2, e1)
	}
	mustCommit(t, b,
		driver.Action{Key: doc1, Write: putDoc(condCreate, "Same")},
		driver.Action{Key: e1, Write: putEntry(condCreate, doc1, "same")})
	mustCommit(t, b,
		driver.Action{Key: doc2, Write: putDoc(condCreate, "Same")},
		driver.Action{Key: e2, Write: putEntry(condCreate, doc2, "same")})
	if got, _ := readEntry(t, b, e1); got.Doc != doc1 {
		t.Errorf("the entry of scope %q holds %+v", scope1, got)
	}
	if got, _ := readEntry(t, b, e2); got.Doc != doc2 {
		t.Errorf("the entry of scope %q holds %+v", scope2, got)
	}
	for _, c := range []struct{ scope, entry string }{{scope1, e1}, {scope2, e2}} {
		if keys := listedKeys(t, b, entryKeyOf(b, c.scope, "sc.")); !slices.Equal(keys, []string{c.entry}) {
			t.Errorf("List of scope %q's entries = %+q, want [%+q]", c.scope, keys, c.entry)
		}
	}
	if check := b.Abilities().CheckCommit; check != nil {
		err := check([]driver.Action{
			{Key: doc1, Write: putDoc(driver.IfMatch(etagstore.ETagAny), "Mixed")},
			{Key: entryKeyOf(b, scope2, "sc.title.mixed"), Write: putEntry(condCreate, doc1, "mixed")},
		})
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("CheckCommit of a document and another scope's entry = %v, want ErrInvalidInput", err)
		}
	}
}
