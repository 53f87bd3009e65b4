package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// IdxCard is the document type of the index cases: a kanban card whose Title
// is unique (IdxTitle), whose Tag and comma-separated Labels are looked
// up (IdxTag, IdxLabels).
type IdxCard struct {
	Title  string
	Tag    string
	Labels string // comma-separated
	N      int64
}

// PanicTitle is the title on which IdxTitle's function panics.
const PanicTitle = "panic!"

var (
	// IdxTitle is the unique index of a card's Title ("" : none).
	IdxTitle = etagstore.Unique("title", func(c IdxCard) string {
		if c.Title == PanicTitle {
			panic("the index function met " + PanicTitle)
		}
		return c.Title
	})
	// IdxTag is the lookup index of a card's Tag.
	IdxTag = etagstore.Lookup("tag", func(c IdxCard) []string { return []string{c.Tag} })
	// IdxLabels is the lookup index of a card's Labels.
	IdxLabels = etagstore.Lookup("labels", func(c IdxCard) []string { return strings.Split(c.Labels, ",") })
	// cardCode is a unique index of the Tag, declared by some cases only.
	cardCode = etagstore.Unique("code", func(c IdxCard) string { return c.Tag })
)

// NewIdxCards is a Store of Cards over b with the three indexes.
func NewIdxCards(b driver.Backend, opts *etagstore.Options) *etagstore.Store[IdxCard] {
	return etagstore.New[IdxCard](b, opts, IdxTitle, IdxTag, IdxLabels)
}

// indexCases are the cases of RunIndexes on a backend that keeps entries.
var indexCases = []struct {
	name string
	fn   func(t *testing.T, x *ix)
}{
	{"CreateKeepsEntries", testIndexCreate},
	{"Duplicate", testIndexDuplicate},
	{"DuplicateEveryWrite", testIndexDuplicateEveryWrite},
	{"UnchangedSendsNothing", testIndexUnchanged},
	{"ChangedMovesEntry", testIndexMoves},
	{"ReplaceForms", testIndexReplaceForms},
	{"DeleteForms", testIndexDeleteForms},
	{"Upsert", testIndexUpsert},
	{"Save", testIndexSave},
	{"Requests", testIndexRequests},
	{"GetBy", testIndexGetBy},
	{"ListBy", testIndexListBy},
	{"ListByKeyOrder", testIndexListByKeyOrder},
	{"NotListed", testIndexNotListed},
	{"Values", testIndexValues},
	{"LongValues", testIndexLongValues},
	{"Scopes", testIndexScopes},
	{"Transact", testIndexTransact},
	{"TransactSwap", testIndexTransactSwap},
	{"TransactDuplicate", testIndexTransactDuplicate},
	{"TransactAcrossStores", testIndexTransactAcrossStores},
	{"TransactWithUnindexedStore", testIndexTransactWithUnindexedStore},
	{"PanickingIndex", testIndexPanics},
	{"BadDeclarations", testIndexBadDeclarations},
	{"UndeclaredIndex", testIndexUndeclared},
	{"ConcurrentCreates", testIndexConcurrentCreates},
}

// RunIndexes checks a Store's unique and lookup indexes (etagstore.Unique,
// etagstore.Lookup) on the backends newBackend makes: every write keeps
// its entries in the same request as its document, a duplicate is a
// *UniqueError and writes nothing, reads by value never lie. On a backend
// without index entries (blobs) it checks the refusal instead. Run runs it;
// tablestore runs it again without Options.Partition (values carry their
// partition).
func RunIndexes(t *testing.T, newBackend NewBackend) {
	t.Helper()
	if newBackend(t).Abilities().Entries == nil {
		t.Run("Unsupported", func(t *testing.T) { testIndexUnsupported(t, newBackend(t)) })
		return
	}
	for _, cfg := range []struct {
		name string
		opts etagstore.Options
	}{
		{"Default", etagstore.Options{}},
		{"NoCache", etagstore.Options{CacheSize: -1}},
		{"NoGroup", etagstore.Options{DisableGroupCommit: true}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			for _, tc := range indexCases {
				t.Run(tc.name, func(t *testing.T) {
					rec := &recording{Backend: newBackend(t)}
					x := &ix{t: t, rec: rec, opts: cfg.opts}
					x.s = NewIdxCards(rec, x.options())
					tc.fn(t, x)
				})
			}
		})
	}
}

// ix is one index case: its backend (recorded), its Store and options.
type ix struct {
	t    *testing.T
	rec  *recording
	s    *etagstore.Store[IdxCard]
	opts etagstore.Options
}

func (x *ix) options() *etagstore.Options { return withErrorLines(x.t, x.opts) }

// fresh is another Store of Cards over the same backend: an empty cache.
func (x *ix) fresh() *etagstore.Store[IdxCard] { return NewIdxCards(x.rec, x.options()) }

// key is the key of card in board b1 (the scope the case uses), in the
// backend's key format: "b1/card" where accepted.
func (x *ix) key(card string) string { return docKey(x.t, x.rec.Backend, "b1", card) }

// keyIn is the key of card in board.
func (x *ix) keyIn(board, card string) string { return docKey(x.t, x.rec.Backend, board, card) }

// val is v as GetBy and ListBy take it for documents of board b1: with
// its scope ("b1/" on a table without Options.Partition).
func (x *ix) val(v string) string { return x.valIn("b1", v) }

func (x *ix) valIn(board, v string) string {
	return scopeOf(x.t, x.rec.Backend, x.keyIn(board, "c")) + v
}

// recording is a backend that records the keys of every write, delete and
// commit action it is sent (Abilities.Commit included).
type recording struct {
	driver.Backend
	mu      sync.Mutex
	commits int
	sent    []string // "write key", "delete key", "commit key" for each action
}

func (r *recording) note(s string) {
	r.mu.Lock()
	r.sent = append(r.sent, s)
	r.mu.Unlock()
}

func (r *recording) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	r.note("write " + key)
	return r.Backend.Write(ctx, key, w)
}

func (r *recording) Delete(ctx context.Context, key string, etag driver.ETag) error {
	r.note("delete " + key)
	return r.Backend.Delete(ctx, key, etag)
}

func (r *recording) Abilities() driver.Abilities {
	a := r.Backend.Abilities()
	if commit := a.Commit; commit != nil {
		a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
			r.mu.Lock()
			r.commits++
			for _, ac := range actions {
				r.sent = append(r.sent, "commit "+ac.Key)
			}
			r.mu.Unlock()
			return commit(ctx, actions)
		}
	}
	return a
}

// reset forgets what was recorded.
func (r *recording) reset() {
	r.mu.Lock()
	r.sent, r.commits = nil, 0
	r.mu.Unlock()
}

// entryKeysSent are the recorded entries' keys (those ValidateKey refuses).
func (r *recording) entryKeysSent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.sent {
		_, key, _ := strings.Cut(s, " ")
		if r.Backend.ValidateKey(key) != nil {
			out = append(out, s)
		}
	}
	return out
}

func (r *recording) commitCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commits
}

// counted is a driver.RequestCounter.
type counted struct{ n atomic.Int64 }

func (c *counted) Sent(context.Context, error) { c.n.Add(1) }

// requests runs op with a context counting its storage requests and
// returns how many it sent.
func requests(ctx context.Context, op func(ctx context.Context)) int {
	var c counted
	op(driver.CountRequests(ctx, &c))
	return int(c.n.Load())
}

// IndexEntry is one stored index entry, as the Store writes it.
type IndexEntry struct {
	Key   string // the entry's own key
	Index string
	Value string
	Doc   string
}

// ListEntries lists every index entry of scope ("" on a backend of one
// scope; "pk/" on a table without Options.Partition) through b's List.
func ListEntries(ctx context.Context, b driver.Backend, scope string) ([]IndexEntry, error) {
	var out []IndexEntry
	for it, err := range b.List(ctx, b.Abilities().Entries.Key(scope, "")) {
		if err != nil {
			return nil, err
		}
		var e IndexEntry
		if err := json.Unmarshal(it.Data, &e); err != nil {
			return nil, fmt.Errorf("entry %+q: %s: %v", it.Key, it.Data, err)
		}
		e.Key = it.Key
		out = append(out, e)
	}
	return out, nil
}

// IdxCardProblems compares the stored entries of scope with the ones
// the cards listed under docPrefix imply (IdxTitle, IdxTag, IdxLabels)
// and returns every difference: a duplicate title, a document without an
// entry, an entry without its document (or not held by it), an entry
// stored twice. nil means the invariant holds.
func IdxCardProblems(ctx context.Context, s *etagstore.Store[IdxCard], scope, docPrefix string) ([]string, error) {
	b := s.Backend()
	entries, err := ListEntries(ctx, b, scope)
	if err != nil {
		return nil, err
	}
	type triple struct{ index, value, doc string }
	want := map[triple]bool{}
	var problems []string
	titles := map[string]string{}
	for d, err := range s.List(ctx, docPrefix) {
		if err != nil {
			return nil, err
		}
		c := d.Value
		if c.Title != "" && c.Title != PanicTitle {
			if other, ok := titles[c.Title]; ok {
				problems = append(problems, fmt.Sprintf("duplicate: %q and %q both hold title %q", other, d.Key, c.Title))
			}
			titles[c.Title] = d.Key
			want[triple{"title", c.Title, d.Key}] = true
		}
		if c.Tag != "" {
			want[triple{"tag", c.Tag, d.Key}] = true
		}
		for _, l := range strings.Split(c.Labels, ",") {
			if l != "" {
				want[triple{"labels", l, d.Key}] = true
			}
		}
	}
	got := map[triple]string{}
	for _, e := range entries {
		tr := triple{e.Index, e.Value, e.Doc}
		if k, ok := got[tr]; ok {
			problems = append(problems, fmt.Sprintf("entry %+v stored twice: %+q and %+q", tr, k, e.Key))
		}
		got[tr] = e.Key
		if !want[tr] {
			problems = append(problems, fmt.Sprintf("orphan: entry %+q (%s %q → %q) has no document holding it", e.Key, e.Index, e.Value, e.Doc))
		}
	}
	for tr := range want {
		if _, ok := got[tr]; !ok {
			problems = append(problems, fmt.Sprintf("missing: document %q holds %s %q without its entry", tr.doc, tr.index, tr.value))
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// wantEntries checks that the entries of the case's scope are exactly
// those of its documents.
func (x *ix) wantEntries() {
	x.t.Helper()
	x.wantEntriesIn("b1")
}

func (x *ix) wantEntriesIn(board string) {
	x.t.Helper()
	key := x.keyIn(board, "c")
	scope := scopeOf(x.t, x.rec.Backend, key)
	problems, err := IdxCardProblems(x.t.Context(), NewIdxCards(x.rec.Backend, nil), scope, scope)
	if err != nil {
		x.t.Fatalf("reading entries: %v", err)
	}
	for _, p := range problems {
		x.t.Error(p)
	}
	if len(problems) > 0 {
		x.t.FailNow()
	}
}

// entryCount is how many entries the case's scope holds.
func (x *ix) entryCount() int {
	x.t.Helper()
	es, err := ListEntries(x.t.Context(), x.rec.Backend, scopeOf(x.t, x.rec.Backend, x.key("c")))
	if err != nil {
		x.t.Fatal(err)
	}
	return len(es)
}

func (x *ix) create(key string, c IdxCard) etagstore.Doc[IdxCard] {
	x.t.Helper()
	d, err := x.s.Create(x.t.Context(), key, c)
	if err != nil {
		x.t.Fatalf("Create(%q, %+v): %v", key, c, err)
	}
	return d
}

// wantUnique checks that err is a *UniqueError of index on value held by
// holder, refusing by, and matching ErrExists.
func wantUnique(t *testing.T, err error, index, value, holder, by string) {
	t.Helper()
	var ue *etagstore.UniqueError
	if !errors.As(err, &ue) || !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("err = %v (%T), want a *UniqueError matching ErrExists", err, err)
	}
	if ue.Index != index || ue.Value != value || ue.Key != holder || (by != "" && ue.By != by) {
		t.Fatalf("UniqueError = %+v, want Index %q Value %q Key %q By %q", *ue, index, value, holder, by)
	}
	if errors.Is(err, etagstore.ErrConflict) || errors.Is(err, etagstore.ErrOutcomeUnknown) {
		t.Fatalf("UniqueError %v also matches ErrConflict or ErrOutcomeUnknown", err)
	}
}

func (x *ix) wantDoc(key string, want IdxCard) etagstore.Doc[IdxCard] {
	x.t.Helper()
	d, err := x.fresh().Get(x.t.Context(), key)
	if err != nil {
		x.t.Fatalf("Get(%q): %v", key, err)
	}
	if d.Value != want {
		x.t.Fatalf("Get(%q) = %+v, want %+v", key, d.Value, want)
	}
	return d
}

func (x *ix) wantNoDoc(key string) {
	x.t.Helper()
	if d, err := x.fresh().Get(x.t.Context(), key); !errors.Is(err, etagstore.ErrNotFound) {
		x.t.Fatalf("Get(%q) = %+v, %v; want ErrNotFound", key, d, err)
	}
}

// getBy checks that GetBy(idx, value) returns the document of key (""
// : ErrNotFound).
func (x *ix) getBy(s *etagstore.Store[IdxCard], idx etagstore.Index[IdxCard], value, key string) {
	x.t.Helper()
	d, err := s.GetBy(x.t.Context(), idx, value)
	switch {
	case key == "" && !errors.Is(err, etagstore.ErrNotFound):
		x.t.Fatalf("GetBy(%v, %q) = %q, %v; want ErrNotFound", idx, value, d.Key, err)
	case key != "" && (err != nil || d.Key != key):
		x.t.Fatalf("GetBy(%v, %q) = %q, %v; want %q", idx, value, d.Key, err, key)
	}
}

// listBy is the keys ListBy(idx, value) yields.
func (x *ix) listBy(idx etagstore.Index[IdxCard], value string) []string {
	x.t.Helper()
	var keys []string
	for d, err := range x.s.ListBy(x.t.Context(), idx, value) {
		if err != nil {
			x.t.Fatalf("ListBy(%v, %q): %v", idx, value, err)
		}
		keys = append(keys, d.Key)
	}
	return keys
}

// testIndexCreate: a Create writes the document's entries with it, one
// commit; a Create without indexed values writes none.
func testIndexCreate(t *testing.T, x *ix) {
	k1 := x.key("c1")
	x.create(k1, IdxCard{Title: "ship it", Tag: "web", Labels: "urgent,web"})
	if n := x.rec.commitCount(); n != 1 {
		t.Errorf("Create sent %d commits, want 1 (the document and its entries)", n)
	}
	if n := x.entryCount(); n != 4 {
		t.Errorf("%d entries after one Create, want 4 (title, tag, two labels)", n)
	}
	x.wantEntries()
	x.rec.reset()
	x.create(x.key("c2"), IdxCard{N: 1})
	if sent := x.rec.entryKeysSent(); len(sent) != 0 {
		t.Errorf("a Create without indexed values sent entries: %q", sent)
	}
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("ship it"), k1)
}

// testIndexDuplicate: a second document taking a held value fails with a
// *UniqueError naming the index, the value and the holder; nothing is
// written, and the write is not retried (one commit at most).
func testIndexDuplicate(t *testing.T, x *ix) {
	k1, k2 := x.key("c1"), x.key("c2")
	d1 := x.create(k1, IdxCard{Title: "ship it", Labels: "a"})
	x.rec.reset()
	_, err := x.s.Create(t.Context(), k2, IdxCard{Title: "ship it", Labels: "b"})
	wantUnique(t, err, "title", "ship it", k1, k2)
	if n := x.rec.commitCount(); n > 1 {
		t.Errorf("a duplicate Create sent %d commits, want at most 1 (not retried; none when the Store, having written the value's entry, reads it first)", n)
	}
	x.wantNoDoc(k2)
	x.wantDoc(k1, d1.Value)
	x.wantEntries()
	if got := x.listBy(IdxLabels, x.val("b")); len(got) != 0 {
		t.Errorf("ListBy(labels, b) = %q after a refused Create, want none", got)
	}
	// The refused key can still be created with another title.
	x.create(k2, IdxCard{Title: "other"})
	x.wantEntries()
}

// testIndexDuplicateEveryWrite: Update, Replace (read, hand-built,
// ETagAny), Upsert and Save taking a held value all fail with a
// *UniqueError and write nothing.
func testIndexDuplicateEveryWrite(t *testing.T, x *ix) {
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	x.create(k1, IdxCard{Title: "held"})
	d2 := x.create(x.key("c2"), IdxCard{Title: "mine", N: 2})
	type op struct {
		name string
		run  func(s *etagstore.Store[IdxCard]) error
	}
	ops := []op{
		{"Update", func(s *etagstore.Store[IdxCard]) error {
			_, err := s.Update(ctx, k2, func(c *IdxCard) error { c.Title = "held"; return nil })
			return err
		}},
		{"Replace(read)", func(s *etagstore.Store[IdxCard]) error {
			d, err := s.Get(ctx, k2)
			if err != nil {
				return err
			}
			d.Value.Title = "held"
			_, err = s.Replace(ctx, d)
			return err
		}},
		{"Replace(hand-built)", func(s *etagstore.Store[IdxCard]) error {
			_, err := s.Replace(ctx, etagstore.Doc[IdxCard]{Key: k2, ETag: d2.ETag, Value: IdxCard{Title: "held"}})
			return err
		}},
		{"Replace(ETagAny)", func(s *etagstore.Store[IdxCard]) error {
			_, err := s.Replace(ctx, etagstore.Doc[IdxCard]{Key: k2, ETag: etagstore.ETagAny, Value: IdxCard{Title: "held"}})
			return err
		}},
		{"Upsert", func(s *etagstore.Store[IdxCard]) error {
			_, err := s.Upsert(ctx, k2, IdxCard{Title: "held"})
			return err
		}},
		{"Upsert(new key)", func(s *etagstore.Store[IdxCard]) error {
			_, err := s.Upsert(ctx, x.key("c3"), IdxCard{Title: "held"})
			return err
		}},
		{"Save", func(s *etagstore.Store[IdxCard]) error {
			_, err := s.Save(ctx, d2, IdxCard{Title: "held", N: 2}, nil)
			return err
		}},
		{"Update(CreateIfMissing)", func(s *etagstore.Store[IdxCard]) error {
			_, err := s.Update(ctx, x.key("c4"), func(c *IdxCard) error { c.Title = "held"; return nil }, etagstore.CreateIfMissing())
			return err
		}},
	}
	for _, o := range ops {
		for _, which := range []string{"same", "fresh"} {
			s := x.s
			if which == "fresh" {
				s = x.fresh()
			}
			x.rec.reset()
			err := o.run(s)
			var ue *etagstore.UniqueError
			if !errors.As(err, &ue) || !errors.Is(err, etagstore.ErrExists) || ue.Key != k1 || ue.Value != "held" || ue.Index != "title" {
				t.Errorf("%s (%s Store) taking a held title = %v, want *UniqueError(title, held, %q)", o.name, which, err, k1)
			}
			if n := x.rec.commitCount(); n > 1 {
				t.Errorf("%s (%s Store): %d commits, want 1 (not retried)", o.name, which, n)
			}
		}
	}
	x.wantDoc(k2, d2.Value)
	x.wantNoDoc(x.key("c3"))
	x.wantNoDoc(x.key("c4"))
	x.wantEntries()
}

// testIndexUnchanged: a write that does not change an indexed value sends
// no entry; one that changes one index sends that index's entries only.
func testIndexUnchanged(t *testing.T, x *ix) {
	ctx := t.Context()
	k := x.key("c1")
	d := x.create(k, IdxCard{Title: "t", Tag: "g", Labels: "a,b"})
	x.rec.reset()
	d, err := x.s.Update(ctx, k, func(c *IdxCard) error { c.N++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if sent := x.rec.entryKeysSent(); len(sent) != 0 {
		t.Errorf("Update of N sent entries: %q", sent)
	}
	x.rec.reset()
	d.Value.N++
	if d, err = x.s.Replace(ctx, d); err != nil {
		t.Fatal(err)
	}
	if sent := x.rec.entryKeysSent(); len(sent) != 0 {
		t.Errorf("Replace of N sent entries: %q", sent)
	}
	x.rec.reset()
	if d, err = x.s.Save(ctx, d, IdxCard{Title: "t", Tag: "g", Labels: "a,b", N: 10}, nil); err != nil {
		t.Fatal(err)
	}
	if sent := x.rec.entryKeysSent(); len(sent) != 0 {
		t.Errorf("Save of N sent entries: %q", sent)
	}
	// Labels in another order, or repeated, are the same values.
	x.rec.reset()
	if d, err = x.s.Update(ctx, k, func(c *IdxCard) error { c.Labels = "b,a,a"; return nil }); err != nil {
		t.Fatal(err)
	}
	if sent := x.rec.entryKeysSent(); len(sent) != 0 {
		t.Errorf("Update reordering labels sent entries: %q", sent)
	}
	// A new label: its entry only (one key).
	x.rec.reset()
	if d, err = x.s.Update(ctx, k, func(c *IdxCard) error { c.Labels = "a,b,c"; return nil }); err != nil {
		t.Fatal(err)
	}
	if sent := x.rec.entryKeysSent(); len(sent) != 1 {
		t.Errorf("Update adding a label sent entries %q, want the new label's alone", sent)
	}
	x.wantEntries()
	_ = d
}

// testIndexMoves: a changed value deletes the old entry and writes the new
// one; the old value is free at once.
func testIndexMoves(t *testing.T, x *ix) {
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	x.create(k1, IdxCard{Title: "old", Tag: "t1", Labels: "a"})
	x.rec.reset()
	if _, err := x.s.Update(ctx, k1, func(c *IdxCard) error { c.Title, c.Tag, c.Labels = "new", "t2", "b"; return nil }); err != nil {
		t.Fatal(err)
	}
	if n := x.rec.commitCount(); n != 1 {
		t.Errorf("a rename sent %d commits, want 1", n)
	}
	if sent := x.rec.entryKeysSent(); len(sent) != 6 {
		t.Errorf("a rename of three indexes sent entries %q, want 6 (three deletes, three writes)", sent)
	}
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("old"), "")
	x.getBy(x.s, IdxTitle, x.val("new"), k1)
	x.create(k2, IdxCard{Title: "old", Tag: "t1", Labels: "a"})
	x.wantEntries()
	// Clearing a value deletes its entry.
	if _, err := x.s.Update(ctx, k1, func(c *IdxCard) error { c.Title, c.Tag, c.Labels = "", "", ""; return nil }); err != nil {
		t.Fatal(err)
	}
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("new"), "")
	// Renames back and forth.
	for i := range 4 {
		title := fmt.Sprint("r", i%2)
		if _, err := x.s.Update(ctx, k1, func(c *IdxCard) error { c.Title = title; return nil }); err != nil {
			t.Fatal(err)
		}
		x.getBy(x.fresh(), IdxTitle, x.val(title), k1)
	}
	x.wantEntries()
}

// testIndexReplaceForms: Replace of a read document, of a hand-built one
// (ETag kept from before, through a Store that never read it), and with
// ETagAny, each moves the entries.
func testIndexReplaceForms(t *testing.T, x *ix) {
	ctx := t.Context()
	k := x.key("c1")
	d := x.create(k, IdxCard{Title: "a", Labels: "x"})
	d.Value = IdxCard{Title: "b", Labels: "y"}
	d, err := x.s.Replace(ctx, d)
	if err != nil {
		t.Fatalf("Replace(read): %v", err)
	}
	x.wantEntries()
	// Hand-built, through a Store that never saw the document.
	d, err = x.fresh().Replace(ctx, etagstore.Doc[IdxCard]{Key: k, ETag: d.ETag, Value: IdxCard{Title: "c", Labels: "z"}})
	if err != nil {
		t.Fatalf("Replace(hand-built): %v", err)
	}
	x.wantEntries()
	// Hand-built, through the Store whose cache holds an older version.
	if _, err = x.s.Replace(ctx, etagstore.Doc[IdxCard]{Key: k, ETag: d.ETag, Value: IdxCard{Title: "d"}}); err != nil {
		t.Fatalf("Replace(hand-built, stale cache): %v", err)
	}
	x.wantEntries()
	for i, s := range []*etagstore.Store[IdxCard]{x.s, x.fresh()} {
		title := fmt.Sprint("any", i)
		if _, err = s.Replace(ctx, etagstore.Doc[IdxCard]{Key: k, ETag: etagstore.ETagAny, Value: IdxCard{Title: title, Labels: title}}); err != nil {
			t.Fatalf("Replace(ETagAny): %v", err)
		}
		x.wantEntries()
		x.getBy(x.s, IdxTitle, x.val(title), k)
	}
	// A stale hand-built Replace conflicts and writes nothing.
	_, err = x.fresh().Replace(ctx, etagstore.Doc[IdxCard]{Key: k, ETag: d.ETag, Value: IdxCard{Title: "stale"}})
	if !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("stale Replace = %v, want ErrConflict", err)
	}
	x.getBy(x.s, IdxTitle, x.val("stale"), "")
	x.wantEntries()
	// Replace of a missing key: ErrNotFound, no entry.
	_, err = x.fresh().Replace(ctx, etagstore.Doc[IdxCard]{Key: x.key("gone"), ETag: etagstore.ETagAny, Value: IdxCard{Title: "ghost"}})
	if !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Replace(missing, ETagAny) = %v, want ErrNotFound", err)
	}
	x.getBy(x.s, IdxTitle, x.val("ghost"), "")
	x.wantEntries()
}

// testIndexDeleteForms: Delete with the ETag (read, or not), and with
// ETagAny, removes the entries; the values are free again.
func testIndexDeleteForms(t *testing.T, x *ix) {
	ctx := t.Context()
	ka, kb, kc := x.key("a"), x.key("b"), x.key("c")
	da := x.create(ka, IdxCard{Title: "ta", Labels: "l"})
	db := x.create(kb, IdxCard{Title: "tb", Labels: "l"})
	x.create(kc, IdxCard{Title: "tc", Labels: "l"})
	if err := x.s.Delete(ctx, ka, da.ETag); err != nil {
		t.Fatalf("Delete(ETag): %v", err)
	}
	x.wantEntries()
	if err := x.fresh().Delete(ctx, kb, db.ETag); err != nil {
		t.Fatalf("Delete(ETag, not read by this Store): %v", err)
	}
	x.wantEntries()
	if err := x.fresh().Delete(ctx, kc, etagstore.ETagAny); err != nil {
		t.Fatalf("Delete(ETagAny): %v", err)
	}
	x.wantEntries()
	if n := x.entryCount(); n != 0 {
		t.Errorf("%d entries left after deleting every document", n)
	}
	for _, title := range []string{"ta", "tb", "tc"} {
		x.create(x.key("new-"+title), IdxCard{Title: title})
	}
	x.wantEntries()
	// A stale Delete conflicts and leaves the entries.
	if err := x.fresh().Delete(ctx, x.key("new-ta"), da.ETag); !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("stale Delete = %v, want ErrConflict", err)
	}
	x.wantEntries()
}

// testIndexUpsert: Upsert of a missing and an existing key keeps entries,
// through the Store that wrote it and through one that never read it.
func testIndexUpsert(t *testing.T, x *ix) {
	ctx := t.Context()
	k := x.key("c1")
	if _, err := x.s.Upsert(ctx, k, IdxCard{Title: "u1", Labels: "a"}); err != nil {
		t.Fatalf("Upsert(missing): %v", err)
	}
	x.wantEntries()
	if _, err := x.s.Upsert(ctx, k, IdxCard{Title: "u2", Labels: "b"}); err != nil {
		t.Fatalf("Upsert(existing): %v", err)
	}
	x.wantEntries()
	if _, err := x.fresh().Upsert(ctx, k, IdxCard{Title: "u3", Labels: "c"}); err != nil {
		t.Fatalf("Upsert(existing, another Store): %v", err)
	}
	x.wantEntries()
	// The cache of x.s is stale now: its Upsert must still replace u3's entries.
	if _, err := x.s.Upsert(ctx, k, IdxCard{Title: "u4"}); err != nil {
		t.Fatalf("Upsert(existing, stale cache): %v", err)
	}
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("u3"), "")
	x.getBy(x.s, IdxTitle, x.val("u4"), k)
	// An unchanged Upsert sends no entry.
	x.rec.reset()
	if _, err := x.s.Upsert(ctx, k, IdxCard{Title: "u4", N: 1}); err != nil {
		t.Fatal(err)
	}
	if sent := x.rec.entryKeysSent(); len(sent) != 0 {
		t.Errorf("Upsert keeping the title sent entries: %q", sent)
	}
	x.wantEntries()
}

// testIndexSave: Save keeps entries, when its base is current and when it
// merges with a newer version.
func testIndexSave(t *testing.T, x *ix) {
	ctx := t.Context()
	k := x.key("c1")
	base := x.create(k, IdxCard{Title: "s1", Tag: "g1"})
	d, err := x.s.Save(ctx, base, IdxCard{Title: "s2", Tag: "g1"}, nil)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	x.wantEntries()
	// Someone else changes the Tag; our Save of the title from d merges.
	if _, err := x.fresh().Update(ctx, k, func(c *IdxCard) error { c.Tag = "g2"; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := x.s.Save(ctx, d, IdxCard{Title: "s3", Tag: "g1"}, nil)
	if err != nil {
		t.Fatalf("Save merging: %v", err)
	}
	if got.Value.Title != "s3" || got.Value.Tag != "g2" {
		t.Fatalf("merged Save = %+v, want title s3 and tag g2", got.Value)
	}
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("s3"), k)
	if keys := x.listBy(IdxTag, x.val("g1")); len(keys) != 0 {
		t.Errorf("ListBy(tag, g1) = %q after a merge, want none", keys)
	}
}

// testIndexRequests: a write that changes an indexed value sends as many
// requests as the same write of a Store without indexes (the entries ride
// in its request); GetBy reads at most twice.
func testIndexRequests(t *testing.T, x *ix) {
	ctx := t.Context()
	plain := etagstore.New[IdxCard](x.rec, x.options())
	probe := requests(ctx, func(ctx context.Context) {
		if _, err := plain.Create(ctx, x.key("probe"), IdxCard{}); err != nil {
			t.Fatal(err)
		}
	})
	if probe != 1 {
		t.Fatalf("a plain Create counted %d requests, want 1 (is the counter installed?)", probe)
	}
	type op struct {
		name string
		run  func(ctx context.Context, s *etagstore.Store[IdxCard], key string) error
	}
	ops := []op{
		{"Create", func(ctx context.Context, s *etagstore.Store[IdxCard], key string) error {
			_, err := s.Create(ctx, key+"-new", IdxCard{Title: key + "-t0", Labels: "a"})
			return err
		}},
		{"Update", func(ctx context.Context, s *etagstore.Store[IdxCard], key string) error {
			_, err := s.Update(ctx, key, func(c *IdxCard) error { c.Title = key + "-t1"; return nil })
			return err
		}},
		{"Replace", func(ctx context.Context, s *etagstore.Store[IdxCard], key string) error {
			d, err := s.Get(ctx, key)
			if err != nil {
				return err
			}
			return retitled(ctx, s, d, key+"-t2")
		}},
		{"Delete", func(ctx context.Context, s *etagstore.Store[IdxCard], key string) error {
			d, err := s.Get(ctx, key)
			if err != nil {
				return err
			}
			return s.Delete(ctx, key, d.ETag)
		}},
	}
	for _, o := range ops {
		var counts [2]int
		for i, s := range []*etagstore.Store[IdxCard]{plain, x.s} {
			key := x.key(fmt.Sprintf("%s-%d", strings.ToLower(o.name), i))
			if _, err := s.Create(ctx, key, IdxCard{Title: key, Labels: "a"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, key); err != nil { // both caches warm
				t.Fatal(err)
			}
			counts[i] = requests(ctx, func(ctx context.Context) {
				if err := o.run(ctx, s, key); err != nil {
					t.Fatalf("%s: %v", o.name, err)
				}
			})
		}
		if o.name == "Delete" && x.opts.CacheSize < 0 {
			// Without a cache a Delete by ETag cannot know the values it
			// removes without reading them: one read more is its price.
			if counts[1] > counts[0]+1 {
				t.Errorf("Delete of an indexed value without a cache: %d requests, without indexes %d; want at most 1 extra", counts[1], counts[0])
			}
			continue
		}
		if counts[1] != counts[0] {
			t.Errorf("%s of an indexed value: %d requests, without indexes %d; want 0 extra", o.name, counts[1], counts[0])
		}
	}
	// This case's plain Store wrote documents without their entries: forget them.
	k := x.key("getby")
	x.create(k, IdxCard{Title: "g"})
	n := requests(ctx, func(ctx context.Context) { x.getBy(x.fresh(), IdxTitle, x.val("g"), k) })
	if n > 2 {
		t.Errorf("GetBy sent %d requests, want at most 2", n)
	}
	n = requests(ctx, func(ctx context.Context) {
		if _, err := x.s.GetBy(ctx, IdxTitle, x.val("nobody")); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("GetBy(nobody) = %v, want ErrNotFound", err)
		}
	})
	if n > 1 {
		t.Errorf("GetBy of a value nobody holds sent %d requests, want 1", n)
	}
}

func retitled(ctx context.Context, s *etagstore.Store[IdxCard], d etagstore.Doc[IdxCard], title string) error {
	d.Value.Title = title
	_, err := s.Replace(ctx, d)
	return err
}

// testIndexGetBy: GetBy returns the holder, with its ETag; ErrNotFound for
// a value nobody holds; a Lookup index is ErrInvalidInput.
func testIndexGetBy(t *testing.T, x *ix) {
	ctx := t.Context()
	k := x.key("c1")
	d := x.create(k, IdxCard{Title: "T", Tag: "g"})
	got, err := x.s.GetBy(ctx, IdxTitle, x.val("T"))
	if err != nil || got.Key != k || got.ETag != d.ETag || got.Value != d.Value {
		t.Fatalf("GetBy = %+v, %v; want %+v", got, err, d)
	}
	x.getBy(x.s, IdxTitle, x.val("t"), "") // values are as the function gives them
	x.getBy(x.s, IdxTitle, x.val("T "), "")
	if _, err := x.s.GetBy(ctx, IdxTag, x.val("g")); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("GetBy of a Lookup index = %v, want ErrInvalidInput", err)
	}
	// A list of a Unique index yields GetBy's document.
	if keys := x.listBy(IdxTitle, x.val("T")); !slices.Equal(keys, []string{k}) {
		t.Errorf("ListBy(title) = %q, want [%q]", keys, k)
	}
	if keys := x.listBy(IdxTitle, x.val("none")); len(keys) != 0 {
		t.Errorf("ListBy(title, none) = %q, want none", keys)
	}
}

// testIndexListBy: ListBy yields every holder of a lookup value, in key
// order, each once, and stops when asked.
func testIndexListBy(t *testing.T, x *ix) {
	ctx := t.Context()
	var want []string
	for i := range 40 { // more than one round of concurrent reads
		k := x.key(fmt.Sprintf("c%02d", i))
		labels := "odd"
		if i%2 == 0 {
			labels = "even"
			want = append(want, k)
		}
		x.create(k, IdxCard{Title: fmt.Sprint("t", i), Labels: labels + ",all"})
	}
	if got := sorted(x.listBy(IdxLabels, x.val("even"))); !slices.Equal(got, want) {
		t.Errorf("ListBy(even) = %q, want %q", got, want)
	}
	if got := x.listBy(IdxLabels, x.val("all")); len(got) != 40 {
		t.Errorf("ListBy(all) yielded %d, want 40", len(got))
	}
	n := 0
	for _, err := range x.s.ListBy(ctx, IdxLabels, x.val("all")) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	if got := x.listBy(IdxLabels, x.val("al")); len(got) != 0 {
		t.Errorf("ListBy of a prefix of a value = %q, want none", got)
	}
	// A document that changed its labels leaves the listing at once.
	if _, err := x.s.Update(ctx, want[0], func(c *IdxCard) error { c.Labels = "odd"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := sorted(x.listBy(IdxLabels, x.val("even"))); !slices.Equal(got, want[1:]) {
		t.Errorf("ListBy(even) after a change = %q, want %q", got, want[1:])
	}
	x.wantEntries()
}

func sorted(keys []string) []string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return keys
}

// testIndexListByKeyOrder: ListBy yields documents "in the order of their
// entries (by key, within the value's scope)", as getby.go documents it:
// the documents' key order, as List's.
func testIndexListByKeyOrder(t *testing.T, x *ix) {
	var want []string
	for i := range 12 {
		k := x.key(fmt.Sprintf("c%02d", i))
		x.create(k, IdxCard{Labels: "l"})
		want = append(want, k)
	}
	slices.SortFunc(want, x.rec.Backend.Abilities().KeyOrder())
	if got := x.listBy(IdxLabels, x.val("l")); !slices.Equal(got, want) {
		t.Errorf("ListBy = %q, want the documents' key order %q", got, want)
	}
}

// testIndexNotListed: entries never appear in List, Page, or GetBy and
// ListBy of another index.
func testIndexNotListed(t *testing.T, x *ix) {
	ctx := t.Context()
	k := x.key("c1")
	x.create(k, IdxCard{Title: "same", Tag: "same", Labels: "same"})
	scope := scopeOf(t, x.rec.Backend, k)
	for _, prefix := range []string{"", scope} {
		var keys []string
		for d, err := range x.s.List(ctx, prefix) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, d.Key)
		}
		if !slices.Equal(keys, []string{k}) {
			t.Errorf("List(%q) = %q, want [%q]", prefix, keys, k)
		}
		p, err := x.s.Page(ctx, prefix, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Docs) != 1 || p.Docs[0].Key != k {
			t.Errorf("Page(%q) = %d docs, want [%q]", prefix, len(p.Docs), k)
		}
		for it, err := range x.rec.Backend.List(ctx, prefix) {
			if err != nil {
				t.Fatal(err)
			}
			if it.Key != k {
				t.Errorf("Backend.List(%q) yielded %+q", prefix, it.Key)
			}
		}
	}
	// Another Store declaring a unique index on the same value under
	// another name finds nothing.
	codes := etagstore.New[IdxCard](x.rec, x.options(), cardCode)
	x.getBy(codes, cardCode, x.val("same"), "")
	// And a lookup of one name does not see the other lookup's entries.
	if keys := x.listBy(IdxTag, x.val("same")); !slices.Equal(keys, []string{k}) {
		t.Errorf("ListBy(tag) = %q", keys)
	}
	if _, err := x.s.Update(ctx, k, func(c *IdxCard) error { c.Labels = ""; return nil }); err != nil {
		t.Fatal(err)
	}
	if keys := x.listBy(IdxLabels, x.val("same")); len(keys) != 0 {
		t.Errorf("ListBy(labels) = %q after the labels were cleared (the tag holds the same value)", keys)
	}
}

// indexValues are values of characters keys refuse or mangle.
var indexValues = []string{
	"a/b", "/", "x#y", "what?", "100%", "back\\slash", "ünïcödé ✓ 日本語 🚀", "trailing ", " leading",
	"dots...", "~tilde", "quote\"'", "tab\there", "new\nline", "+plus=eq&amp", "e.u.title.x",
}

// testIndexValues: values of any character are held, read and refused as
// values.
func testIndexValues(t *testing.T, x *ix) {
	ctx := t.Context()
	for i, v := range indexValues {
		k := x.key(fmt.Sprint("v", i))
		if _, err := x.s.Create(ctx, k, IdxCard{Title: v, Tag: v, Labels: v}); err != nil {
			t.Errorf("Create with value %q: %v", v, err)
			continue
		}
		if d, err := x.s.GetBy(ctx, IdxTitle, x.val(v)); err != nil || d.Key != k {
			t.Errorf("GetBy(%q) = %q, %v; want %q", v, d.Key, err, k)
		}
		var keys []string
		for d, err := range x.s.ListBy(ctx, IdxTag, x.val(v)) {
			if err != nil {
				t.Errorf("ListBy(%q): %v", v, err)
				break
			}
			keys = append(keys, d.Key)
		}
		if !slices.Equal(keys, []string{k}) {
			t.Errorf("ListBy(tag, %q) = %q, want [%q]", v, keys, k)
		}
		_, err := x.s.Create(ctx, x.key(fmt.Sprint("dup", i)), IdxCard{Title: v})
		var ue *etagstore.UniqueError
		if !errors.As(err, &ue) || ue.Value != v || ue.Key != k {
			t.Errorf("duplicate of %q = %v, want a *UniqueError", v, err)
		}
	}
	x.wantEntries()
}

// testIndexLongValues: values longer than any key are hashed; two that
// share a long prefix are distinct values; the whole value is kept.
func testIndexLongValues(t *testing.T, x *ix) {
	ctx := t.Context()
	long := strings.Repeat("long value ✓ ", 300) // ~4 KB
	vals := []string{long + "A", long + "B", strings.Repeat("z", 241), strings.Repeat("é", 200)}
	for i, v := range vals {
		k := x.key(fmt.Sprint("l", i))
		if _, err := x.s.Create(ctx, k, IdxCard{Title: v, Tag: v}); err != nil {
			t.Fatalf("Create with a value of %d bytes: %v", len(v), err)
		}
		if d, err := x.s.GetBy(ctx, IdxTitle, x.val(v)); err != nil || d.Key != k {
			t.Errorf("GetBy(value of %d bytes) = %q, %v; want %q", len(v), d.Key, err, k)
		}
		var n int
		for d, err := range x.s.ListBy(ctx, IdxTag, x.val(v)) {
			if err != nil {
				t.Errorf("ListBy(value of %d bytes): %v", len(v), err)
				break
			}
			if d.Key != k {
				t.Errorf("ListBy(value of %d bytes) yielded %q", len(v), d.Key)
			}
			n++
		}
		if n != 1 {
			t.Errorf("ListBy(value of %d bytes) yielded %d documents, want 1", len(v), n)
		}
	}
	_, err := x.s.Create(ctx, x.key("dup"), IdxCard{Title: vals[1]})
	wantUnique(t, err, "title", vals[1], x.key("l1"), x.key("dup"))
	x.wantEntries()
}

// testIndexScopes: on a table without Options.Partition a unique value
// holds per partition, and values carry it; on a backend of one scope,
// per Store.
func testIndexScopes(t *testing.T, x *ix) {
	ctx := t.Context()
	k1, k2 := x.keyIn("b1", "c"), x.keyIn("b2", "c")
	x.create(k1, IdxCard{Title: "ship it", Labels: "l"})
	_, err := x.s.Create(ctx, k2, IdxCard{Title: "ship it", Labels: "l"})
	perPartition := scopeOf(t, x.rec.Backend, k1) != scopeOf(t, x.rec.Backend, k2)
	if perPartition {
		if err != nil {
			t.Fatalf("the same title in another partition: %v", err)
		}
		x.getBy(x.s, IdxTitle, x.valIn("b1", "ship it"), k1)
		x.getBy(x.s, IdxTitle, x.valIn("b2", "ship it"), k2)
		if keys := x.listBy(IdxLabels, x.valIn("b2", "l")); !slices.Equal(keys, []string{k2}) {
			t.Errorf("ListBy(b2/l) = %q, want [%q]", keys, k2)
		}
		x.wantEntriesIn("b2")
		// A value without its partition is refused, not read elsewhere.
		if _, err := x.s.GetBy(ctx, IdxTitle, "ship it"); !errors.Is(err, etagstore.ErrInvalidKey) && !errors.Is(err, etagstore.ErrInvalidInput) && !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("GetBy without the partition = %v", err)
		}
	} else {
		wantUnique(t, err, "title", "ship it", k1, k2)
		if keys := x.listBy(IdxLabels, x.val("l")); !slices.Equal(keys, []string{k1}) {
			t.Errorf("ListBy(l) = %q, want [%q]", keys, k1)
		}
	}
	x.wantEntriesIn("b1")
}

// testIndexTransact: Store.Transact keeps the entries of its creates,
// changes and deletes.
func testIndexTransact(t *testing.T, x *ix) {
	ctx := t.Context()
	ka, kb, kc := x.key("a"), x.key("b"), x.key("c")
	x.create(kc, IdxCard{Title: "tc", Labels: "l"})
	_, err := x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
		if err := tx.Create(ka, IdxCard{Title: "ta", Labels: "l"}); err != nil {
			return err
		}
		if err := tx.Put(kb, IdxCard{Title: "tb", Labels: "l,m"}); err != nil {
			return err
		}
		return tx.Delete(kc)
	})
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("tc"), "")
	_, err = x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
		c, err := tx.Get(ka)
		if err != nil {
			return err
		}
		c.Title = "ta2"
		if err := tx.Put(ka, c); err != nil {
			return err
		}
		return tx.Upsert(kc, IdxCard{Title: "tc", Labels: "n"})
	})
	if err != nil {
		t.Fatalf("Transact(rename, upsert): %v", err)
	}
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("ta2"), ka)
	// A transaction taking a held title fails ErrExists; nothing lands.
	_, err = x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
		if err := tx.Put(x.key("d"), IdxCard{Title: "free"}); err != nil {
			return err
		}
		return tx.Put(x.key("e"), IdxCard{Title: "tb"})
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("Transact taking a held title = %v, want ErrExists", err)
	}
	x.wantNoDoc(x.key("d"))
	x.wantNoDoc(x.key("e"))
	x.getBy(x.s, IdxTitle, x.val("free"), "")
	x.wantEntries()
}

// testIndexTransactSwap: two documents swap unique values in one
// transaction.
func testIndexTransactSwap(t *testing.T, x *ix) {
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	x.create(k1, IdxCard{Title: "one"})
	x.create(k2, IdxCard{Title: "two"})
	for range 2 {
		_, err := x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
			a, err := tx.Get(k1)
			if err != nil {
				return err
			}
			b, err := tx.Get(k2)
			if err != nil {
				return err
			}
			a.Title, b.Title = b.Title, a.Title
			if err := tx.Put(k1, a); err != nil {
				return err
			}
			return tx.Put(k2, b)
		})
		if err != nil {
			t.Fatalf("swap: %v", err)
		}
		x.wantEntries()
	}
	x.getBy(x.fresh(), IdxTitle, x.val("one"), k1)
	// A swap through a delete and a create: c2 gives "two" to c3.
	_, err := x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
		if err := tx.Delete(k2); err != nil {
			return err
		}
		return tx.Create(x.key("c3"), IdxCard{Title: "two"})
	})
	if err != nil {
		t.Fatalf("hand over by delete and create: %v", err)
	}
	x.getBy(x.fresh(), IdxTitle, x.val("two"), x.key("c3"))
	x.wantEntries()
}

// testIndexTransactDuplicate: two creates of one value in one transaction
// fail ErrExists, nothing written.
func testIndexTransactDuplicate(t *testing.T, x *ix) {
	ctx := t.Context()
	_, err := x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
		if err := tx.Create(x.key("c1"), IdxCard{Title: "z"}); err != nil {
			return err
		}
		return tx.Create(x.key("c2"), IdxCard{Title: "z"})
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("two creates of one title in a transaction = %v, want ErrExists", err)
	}
	var ue *etagstore.UniqueError
	if !errors.As(err, &ue) {
		t.Errorf("two creates of one title: %T %v, want a *UniqueError", err, err)
	}
	x.wantNoDoc(x.key("c1"))
	x.wantNoDoc(x.key("c2"))
	if n := x.entryCount(); n != 0 {
		t.Errorf("%d entries after a refused transaction", n)
	}
	// Put of a value another member of the same transaction also takes.
	x.create(x.key("c3"), IdxCard{Title: "y"})
	_, err = x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error {
		if err := tx.Put(x.key("c3"), IdxCard{Title: "w"}); err != nil {
			return err
		}
		if err := tx.Put(x.key("c4"), IdxCard{Title: "w"}); err != nil {
			return err
		}
		return nil
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("two puts of one title in a transaction = %v, want ErrExists", err)
	}
	x.wantDoc(x.key("c3"), IdxCard{Title: "y"})
	x.wantEntries()
}

// testIndexTransactAcrossStores: etagstore.Transact with s.In(tx) keeps
// the entries of two Stores of one backend in one commit.
func testIndexTransactAcrossStores(t *testing.T, x *ix) {
	ctx := t.Context()
	other := NewIdxCards(x.rec, x.options())
	ka, kb := x.key("a"), x.key("b")
	x.create(ka, IdxCard{Title: "A"})
	err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		a, err := x.s.In(tx).Get(ka)
		if err != nil {
			return err
		}
		title := a.Title
		a.Title = "A2"
		if err := x.s.In(tx).Put(ka, a); err != nil {
			return err
		}
		return other.In(tx).Create(kb, IdxCard{Title: title, Labels: "moved"})
	})
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	x.getBy(x.fresh(), IdxTitle, x.val("A"), kb)
	x.getBy(x.fresh(), IdxTitle, x.val("A2"), ka)
	x.wantEntries()
	err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		if err := x.s.In(tx).Create(x.key("c"), IdxCard{Title: "C"}); err != nil {
			return err
		}
		return other.In(tx).Create(x.key("d"), IdxCard{Title: "A"})
	})
	if !errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("etagstore.Transact taking a held title = %v, want ErrExists", err)
	}
	x.wantNoDoc(x.key("c"))
	x.wantEntries()
}

// testIndexTransactWithUnindexedStore: in a transaction that also
// writes through a Store without indexes (of the same type), each write
// implies its own Store's entries, whichever Store the transaction used
// first: the indexed Store's keep theirs (a held value is refused), the
// other's imply none.
func testIndexTransactWithUnindexedStore(t *testing.T, x *ix) {
	ctx := t.Context()
	plain := etagstore.New[IdxCard](x.rec, x.options())
	ka := x.key("a")
	x.create(ka, IdxCard{Title: "A"})
	for _, plainFirst := range []bool{true, false} {
		p, k := x.key(fmt.Sprintf("p-%v", plainFirst)), x.key(fmt.Sprintf("b-%v", plainFirst))
		both := func(title string) func(tx *etagstore.Txn) error {
			return func(tx *etagstore.Txn) error {
				writes := []func() error{
					func() error { return plain.In(tx).Put(p, IdxCard{Title: "plain " + title}) },
					func() error { return x.s.In(tx).Create(k, IdxCard{Title: title}) },
				}
				if !plainFirst {
					writes[0], writes[1] = writes[1], writes[0]
				}
				for _, w := range writes {
					if err := w(); err != nil {
						return err
					}
				}
				return nil
			}
		}
		err := etagstore.Transact(ctx, both("A"))
		if !errors.Is(err, etagstore.ErrExists) {
			t.Fatalf("plain Store first %v: a transaction taking a held title = %v, want ErrExists", plainFirst, err)
		}
		x.wantNoDoc(k)
		if _, err := plain.Get(ctx, p); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("plain Store first %v: the refused transaction's other write: %v, want ErrNotFound", plainFirst, err)
		}
		title := fmt.Sprintf("B-%v", plainFirst)
		if err := etagstore.Transact(ctx, both(title)); err != nil {
			t.Fatalf("plain Store first %v: Transact: %v", plainFirst, err)
		}
		x.getBy(x.fresh(), IdxTitle, x.val(title), k)
		if _, err := x.fresh().GetBy(ctx, IdxTitle, x.val("plain "+title)); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("plain Store first %v: GetBy of the unindexed Store's title = %v, want ErrNotFound (no entry)", plainFirst, err)
		}
	}
	es, err := ListEntries(ctx, x.rec.Backend, scopeOf(t, x.rec.Backend, ka))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.HasPrefix(e.Value, "plain ") {
			t.Errorf("an entry %q (%s %q) for a document of the Store without indexes", e.Key, e.Index, e.Value)
		}
	}
}

// testIndexPanics: an index function that panics fails that write alone
// (ErrInvalidInput) and writes nothing; the Store goes on.
func testIndexPanics(t *testing.T, x *ix) {
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	_, err := x.s.Create(ctx, k1, IdxCard{Title: PanicTitle})
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Create with a panicking index function = %v, want ErrInvalidInput", err)
	}
	x.wantNoDoc(k1)
	d := x.create(k2, IdxCard{Title: "fine", Labels: "a"})
	_, err = x.s.Update(ctx, k2, func(c *IdxCard) error { c.Title = PanicTitle; return nil })
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Update to a panicking value = %v, want ErrInvalidInput", err)
	}
	_, err = x.s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error { return tx.Put(k1, IdxCard{Title: PanicTitle}) })
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Transact with a panicking index function = %v, want ErrInvalidInput", err)
	}
	x.wantDoc(k2, d.Value)
	x.wantNoDoc(k1)
	x.wantEntries()
	x.getBy(x.s, IdxTitle, x.val("fine"), k2)
}

// testIndexBadDeclarations: an invalid or repeated index name fails every
// write and read of the Store with ErrInvalidInput; nothing is written.
func testIndexBadDeclarations(t *testing.T, x *ix) {
	ctx := t.Context()
	title := func(c IdxCard) string { return c.Title }
	bad := map[string][]etagstore.Index[IdxCard]{
		"empty name":     {etagstore.Unique("", title)},
		"space":          {etagstore.Unique("by title", title)},
		"dot":            {etagstore.Unique("a.b", title)},
		"slash":          {etagstore.Lookup("a/b", func(c IdxCard) []string { return nil })},
		"non-ASCII":      {etagstore.Unique("títle", title)},
		"33 bytes":       {etagstore.Unique(strings.Repeat("n", 33), title)},
		"declared twice": {etagstore.Unique("title", title), etagstore.Lookup("title", func(c IdxCard) []string { return nil })},
		"zero Index":     {{}},
	}
	for why, defs := range bad {
		s := etagstore.New[IdxCard](x.rec, x.options(), defs...)
		k := x.key("bad")
		if _, err := s.Create(ctx, k, IdxCard{Title: "x"}); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s: Create = %v, want ErrInvalidInput", why, err)
		}
		if _, err := s.Upsert(ctx, k, IdxCard{Title: "x"}); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s: Upsert = %v, want ErrInvalidInput", why, err)
		}
		if _, err := s.GetBy(ctx, defs[0], x.val("x")); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s: GetBy = %v, want ErrInvalidInput", why, err)
		}
		for _, err := range s.ListBy(ctx, defs[0], x.val("x")) {
			if !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("%s: ListBy = %v, want ErrInvalidInput", why, err)
			}
		}
		x.wantNoDoc(k)
	}
	// The longest valid name works.
	name := strings.Repeat("N", 32)
	s := etagstore.New[IdxCard](x.rec, x.options(), etagstore.Unique(name, title))
	k := x.key("ok")
	if _, err := s.Create(ctx, k, IdxCard{Title: "x"}); err != nil {
		t.Fatalf("a name of 32 bytes: %v", err)
	}
	if d, err := s.GetBy(ctx, etagstore.Unique(name, title), x.val("x")); err != nil || d.Key != k {
		t.Fatalf("GetBy by a name of 32 bytes: %v", err)
	}
}

// testIndexUndeclared: GetBy and ListBy with an index not declared on the
// Store fail ErrInvalidInput, as on a Store with no index.
func testIndexUndeclared(t *testing.T, x *ix) {
	ctx := t.Context()
	x.create(x.key("c1"), IdxCard{Title: "x", Tag: "x"})
	plain := etagstore.New[IdxCard](x.rec, x.options())
	for name, s := range map[string]*etagstore.Store[IdxCard]{"indexed": x.s, "plain": plain} {
		if _, err := s.GetBy(ctx, cardCode, x.val("x")); !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s Store: GetBy(undeclared) = %v, want ErrInvalidInput", name, err)
		}
		n := 0
		for _, err := range s.ListBy(ctx, cardCode, x.val("x")) {
			n++
			if !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("%s Store: ListBy(undeclared) = %v, want ErrInvalidInput", name, err)
			}
		}
		if n != 1 {
			t.Errorf("%s Store: ListBy(undeclared) yielded %d times, want the error once", name, n)
		}
	}
	if _, err := plain.GetBy(ctx, IdxTitle, x.val("x")); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("GetBy on a Store without indexes = %v, want ErrInvalidInput", err)
	}
}

// testIndexConcurrentCreates: of many Stores creating different keys with
// one title at once, exactly one succeeds; the others get a *UniqueError
// naming it.
func testIndexConcurrentCreates(t *testing.T, x *ix) {
	ctx := t.Context()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		s := x.fresh()
		wg.Go(func() {
			<-start
			_, errs[i] = s.Create(ctx, x.key(fmt.Sprint("c", i)), IdxCard{Title: "race"})
		})
	}
	close(start)
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("two creates of one title succeeded: %s and c%d", winner, i)
			}
			winner = x.key(fmt.Sprint("c", i))
		}
	}
	if winner == "" {
		t.Fatalf("no create succeeded: %v", errs)
	}
	for i, err := range errs {
		if err != nil {
			wantUnique(t, err, "title", "race", winner, x.key(fmt.Sprint("c", i)))
		}
	}
	x.wantEntries()
}

// testIndexUnsupported: a Store with indexes over a backend that keeps no
// entries (blobs) fails its first write with errors.ErrUnsupported, and
// writes nothing.
func testIndexUnsupported(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	s := NewIdxCards(b, withErrorLines(t, etagstore.Options{}))
	k := "b1-c1"
	checks := map[string]error{}
	_, checks["Create"] = s.Create(ctx, k, IdxCard{Title: "x"})
	_, checks["Create(no value)"] = s.Create(ctx, k, IdxCard{})
	_, checks["Upsert"] = s.Upsert(ctx, k, IdxCard{Title: "x"})
	_, checks["Update(CreateIfMissing)"] = s.Update(ctx, k, func(c *IdxCard) error { c.Title = "x"; return nil }, etagstore.CreateIfMissing())
	_, checks["Transact"] = s.Transact(ctx, func(tx *etagstore.Tx[IdxCard]) error { return tx.Put(k, IdxCard{Title: "x"}) })
	_, checks["GetBy"] = s.GetBy(ctx, IdxTitle, "x")
	for op, err := range checks {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s on %T with indexes = %v, want errors.ErrUnsupported", op, b, err)
		}
	}
	for it, err := range b.List(ctx, "") {
		t.Errorf("written despite the refusal: %q, %v", it.Key, err)
	}
	// Documents written without indexes: Replace and Delete through the
	// indexed Store are refused too, and leave them.
	plain := etagstore.New[IdxCard](b, nil)
	d, err := plain.Create(ctx, k, IdxCard{Title: "x"})
	if err != nil {
		t.Fatal(err)
	}
	d.Value.Title = "y"
	if _, err := s.Replace(ctx, d); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Replace = %v, want errors.ErrUnsupported", err)
	}
	if _, err := s.Update(ctx, k, func(c *IdxCard) error { c.N++; return nil }); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Update = %v, want errors.ErrUnsupported", err)
	}
	if err := s.Delete(ctx, k, d.ETag); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Delete = %v, want errors.ErrUnsupported", err)
	}
	if got, err := plain.Get(ctx, k); err != nil || got.Value.Title != "x" || got.ETag != d.ETag {
		t.Errorf("after refusals: %+v, %v; want the document as written", got, err)
	}
}
