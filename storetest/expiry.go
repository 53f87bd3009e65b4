package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// ExpCard is the document type of the expiry cases: a card that expires
// at Until (the zero time: never), whose Title is unique (ExpTitle) and
// whose Tag is looked up (ExpTag) where the backend keeps entries.
type ExpCard struct {
	Title string
	Tag   string
	Until time.Time
	N     int64
}

// ExpPanic is the title on which ExpUntil's function panics.
const ExpPanic = "expiry panics"

var (
	// ExpUntil is the Expiry index of a card's Until.
	ExpUntil = etagstore.Expiry(func(c ExpCard) time.Time {
		if c.Title == ExpPanic {
			panic("the Expiry function met " + ExpPanic)
		}
		return c.Until
	})
	// ExpTitle is the unique index of a card's Title ("": none).
	ExpTitle = etagstore.Unique("title", func(c ExpCard) string { return c.Title })
	// ExpTag is the lookup index of a card's Tag ("": none).
	ExpTag = etagstore.Lookup("tag", func(c ExpCard) []string {
		if c.Tag == "" {
			return nil
		}
		return []string{c.Tag}
	})
)

// ExpAt is the instant the expiry cases' documents expire at (E): whole
// milliseconds, as expiry entries keep them, and years after the wall
// clock, so that a read judged by the wall clock instead of the Store's
// would show an expired document.
var ExpAt = time.Date(2031, 3, 4, 5, 6, 7, 890_000_000, time.UTC)

// FakeClock is an etagstore.Clock that stands still: only the test moves
// it (Set, Add). Sleep returns at once without moving it (retry delays and
// pauses cost nothing and leave the instant the case judges expiry by
// alone), and counts the calls.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps int
}

// NewFakeClock returns a FakeClock reading now.
func NewFakeClock(now time.Time) *FakeClock { return &FakeClock{now: now} }

// Now returns the clock's instant.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to now.
func (c *FakeClock) Set(now time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

// Add moves the clock by d.
func (c *FakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Sleeps is how many times Sleep was called.
func (c *FakeClock) Sleeps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sleeps
}

// Sleep returns ctx.Err() at once; the clock does not move.
func (c *FakeClock) Sleep(ctx context.Context, _ time.Duration) error {
	c.mu.Lock()
	c.sleeps++
	c.mu.Unlock()
	runtime.Gosched()
	return ctx.Err()
}

// expiryCases are the cases of RunExpiry. Each runs on a fresh backend.
var expiryCases = []struct {
	name string
	fn   func(t *testing.T, x *ex)
}{
	{"ReadsHide", testExpiryReadsHide},
	{"ReadsJudgeByStoreClock", testExpiryStoreClock},
	{"PageSkips", testExpiryPageSkips},
	{"PageFull", testExpiryPageFull},
	{"Never", testExpiryNever},
	{"Refresh", testExpiryRefresh},
	{"TransactReads", testExpiryTransactReads},
	{"TransactPut", testExpiryTransactPut},
	{"TransactCreate", testExpiryTransactCreate},
	{"CreateOver", testExpiryCreateOver},
	{"CreateOverRefreshed", testExpiryCreateOverRefreshed},
	{"UpdateOver", testExpiryUpdateOver},
	{"UpsertOver", testExpiryUpsertOver},
	{"ReplaceOver", testExpiryReplaceOver},
	{"DeleteOver", testExpiryDeleteOver},
	{"UniqueAfterCreateOver", testExpiryUniqueAfterCreateOver},
	{"Sweep", testExpirySweep},
	{"SweepEntries", testExpirySweepEntries},
	{"SweepSkew", testExpirySweepSkew},
	{"SweepWithoutExpiry", testExpirySweepWithoutExpiry},
	{"TwoExpiryIndexes", testExpiryTwoIndexes},
	{"PanickingExpiry", testExpiryPanics},
	{"NotForGetByListBy", testExpiryNotForGetBy},
}

// RunExpiry checks documents that expire (etagstore.Expiry) on the
// backends newBackend makes, with a FakeClock (Options.Clock), never a
// sleep: every read path hides a document from the instant it expires
// (visible 1 ms before it, ErrNotFound or skipped at it); writes over an
// expired document act as over a missing key, replacing it on its ETag;
// Sweep deletes what has expired by the clock less Options.ExpirySkew,
// with its entries. Unique and lookup indexes (GetBy, ListBy, the
// entries' consistency) are checked where the backend keeps entries
// (driver.Abilities.Entries), transactions where it commits
// (Abilities.Commit). Each case runs on a default Store and on one
// without the version cache.
func RunExpiry(t *testing.T, newBackend NewBackend) {
	t.Helper()
	for _, cfg := range []struct {
		name string
		opts etagstore.Options
	}{
		{"Default", etagstore.Options{}},
		{"NoCache", etagstore.Options{CacheSize: -1}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			for _, tc := range expiryCases {
				t.Run(tc.name, func(t *testing.T) {
					b := newBackend(t)
					x := &ex{t: t, b: b, opts: cfg.opts, clock: NewFakeClock(ExpAt.Add(-time.Millisecond))}
					x.s = x.store(x.clock)
					tc.fn(t, x)
				})
			}
		})
	}
}

// ex is one expiry case: its backend, clock and Store (ExpUntil, and
// ExpTitle and ExpTag where the backend keeps entries).
type ex struct {
	t     *testing.T
	b     driver.Backend
	opts  etagstore.Options
	clock *FakeClock
	s     *etagstore.Store[ExpCard]
}

// entries reports whether the backend keeps index entries.
func (x *ex) entries() bool { return x.b.Abilities().Entries != nil }

// commits reports whether the backend commits several documents at once
// (transactions).
func (x *ex) commits() bool { return x.b.Abilities().Commit != nil }

// indexes are the Store's indexes: ExpUntil, and the unique and lookup
// ones where the backend keeps entries.
func (x *ex) indexes() []etagstore.Index[ExpCard] {
	if x.entries() {
		return []etagstore.Index[ExpCard]{ExpUntil, ExpTitle, ExpTag}
	}
	return []etagstore.Index[ExpCard]{ExpUntil}
}

// store is a Store of cards over the case's backend judged by clock.
func (x *ex) store(clock etagstore.Clock) *etagstore.Store[ExpCard] {
	return x.storeOver(x.b, clock)
}

func (x *ex) storeOver(b driver.Backend, clock etagstore.Clock) *etagstore.Store[ExpCard] {
	o := x.opts
	o.Clock = clock
	return etagstore.New[ExpCard](b, withErrorLines(x.t, o), x.indexes()...)
}

// plain is a Store of cards without indexes: it reads what is stored,
// expired or not.
func (x *ex) plain() *etagstore.Store[ExpCard] {
	return etagstore.New[ExpCard](x.b, withErrorLines(x.t, etagstore.Options{CacheSize: -1}))
}

// at moves the case's clock to t.
func (x *ex) at(t time.Time) { x.clock.Set(t) }

// key is the key of card in board b1, in the backend's key format.
func (x *ex) key(card string) string { return docKey(x.t, x.b, "b1", card) }

// prefix is the prefix of the keys of board b1.
func (x *ex) prefix() string { return strings.TrimSuffix(x.key("c"), "c") }

// val is v as GetBy and ListBy take it for documents of board b1: with
// its scope where the backend keeps entries.
func (x *ex) val(v string) string {
	if !x.entries() {
		return v
	}
	return scopeOf(x.t, x.b, x.key("c")) + v
}

// create creates c under key through the case's Store; the Doc it
// returns must say when c expires.
func (x *ex) create(key string, c ExpCard) etagstore.Doc[ExpCard] {
	x.t.Helper()
	d, err := x.s.Create(x.t.Context(), key, c)
	if err != nil {
		x.t.Fatalf("Create(%q, %+v): %v", key, c, err)
	}
	wantExpires(x.t, "Create", d, c.Until)
	return d
}

// wantExpires checks d.Expires, the instant a read or write said d expires.
func wantExpires(t *testing.T, what string, d etagstore.Doc[ExpCard], want time.Time) {
	t.Helper()
	if !d.Expires.Equal(want) || d.Expires.IsZero() != want.IsZero() {
		t.Errorf("%s(%q): Doc.Expires = %v, want %v", what, d.Key, d.Expires, want)
	}
}

// wantIs checks that err matches want, and no other sentinel.
func wantIs(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s = %v, want an error matching %v", what, err, want)
		return
	}
	wantOneSentinel(t, err)
}

// visible checks that s's Get returns c under key, expiring at c.Until.
func (x *ex) visible(s *etagstore.Store[ExpCard], key string, c ExpCard) etagstore.Doc[ExpCard] {
	x.t.Helper()
	d, err := s.Get(x.t.Context(), key)
	if err != nil {
		x.t.Fatalf("at %v: Get(%q) = %v, want the document", x.clock.Now(), key, err)
	}
	if !sameCard(d.Value, c) {
		x.t.Fatalf("Get(%q) = %+v, want %+v", key, d.Value, c)
	}
	wantExpires(x.t, "Get", d, c.Until)
	return d
}

// hidden checks that s's Get of key matches ErrNotFound alone.
func (x *ex) hidden(s *etagstore.Store[ExpCard], key string) {
	x.t.Helper()
	d, err := s.Get(x.t.Context(), key)
	if err == nil {
		x.t.Errorf("at %v: Get(%q) = %+v (expires %v), want ErrNotFound", x.clock.Now(), key, d.Value, d.Expires)
		return
	}
	wantIs(x.t, fmt.Sprintf("at %v: Get(%q)", x.clock.Now(), key), err, etagstore.ErrNotFound)
}

// sameCard compares cards, their times by instant.
func sameCard(a, b ExpCard) bool {
	return a.Title == b.Title && a.Tag == b.Tag && a.N == b.N && a.Until.Equal(b.Until) && a.Until.IsZero() == b.Until.IsZero()
}

// stored is the version stored under key, as the backend holds it
// (expired or not); ok false when the key is missing.
func (x *ex) stored(key string) (driver.Item, bool) {
	x.t.Helper()
	it, err := x.b.Read(x.t.Context(), key)
	switch {
	case errors.Is(err, etagstore.ErrNotFound):
		return driver.Item{}, false
	case err != nil:
		x.t.Fatalf("Backend.Read(%q): %v", key, err)
	}
	return it, true
}

// unchanged checks that key still holds the version etag.
func (x *ex) unchanged(key string, etag etagstore.ETag) {
	x.t.Helper()
	it, ok := x.stored(key)
	if !ok || it.ETag != etag {
		x.t.Errorf("%q: stored %q (present %v), want the version %q untouched", key, it.ETag, ok, etag)
	}
}

// storedCard is the card stored under key, read by a Store without
// indexes (expired or not).
func (x *ex) storedCard(key string) (etagstore.Doc[ExpCard], bool) {
	x.t.Helper()
	d, err := x.plain().Get(x.t.Context(), key)
	switch {
	case errors.Is(err, etagstore.ErrNotFound):
		return d, false
	case err != nil:
		x.t.Fatalf("plain Get(%q): %v", key, err)
	}
	return d, true
}

// listed is the keys s.List(prefix) yields, each checked against the
// expiry its value says.
func (x *ex) listed(s *etagstore.Store[ExpCard]) []string {
	x.t.Helper()
	var keys []string
	for d, err := range s.List(x.t.Context(), x.prefix()) {
		if err != nil {
			x.t.Fatalf("List: %v", err)
		}
		wantExpires(x.t, "List", d, d.Value.Until)
		keys = append(keys, d.Key)
	}
	return keys
}

// paged is the keys of every page of s.Page(prefix, limit), walked to
// the end.
func (x *ex) paged(s *etagstore.Store[ExpCard], limit int) []string {
	x.t.Helper()
	var keys []string
	token := ""
	for range 100 {
		p, err := s.Page(x.t.Context(), x.prefix(), limit, token)
		if err != nil {
			x.t.Fatalf("Page(limit %d): %v", limit, err)
		}
		for _, d := range p.Docs {
			wantExpires(x.t, "Page", d, d.Value.Until)
			keys = append(keys, d.Key)
		}
		if token = p.Next; token == "" {
			return keys
		}
	}
	x.t.Fatalf("Page(limit %d): no end after 100 pages", limit)
	return nil
}

// listedBy is the keys s.ListBy(idx, value) yields.
func (x *ex) listedBy(s *etagstore.Store[ExpCard], idx etagstore.Index[ExpCard], value string) []string {
	x.t.Helper()
	var keys []string
	for d, err := range s.ListBy(x.t.Context(), idx, value) {
		if err != nil {
			x.t.Fatalf("ListBy(%q): %v", value, err)
		}
		wantExpires(x.t, "ListBy", d, d.Value.Until)
		keys = append(keys, d.Key)
	}
	return keys
}

// wantKeys checks a listing's keys, in order.
func (x *ex) wantKeys(what string, got []string, want ...string) {
	x.t.Helper()
	if !slices.Equal(got, want) {
		x.t.Errorf("at %v: %s = %q, want %q", x.clock.Now(), what, got, want)
	}
}

// inOrder is keys in the backend's key order.
func (x *ex) inOrder(keys ...string) []string {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, x.b.Abilities().KeyOrder())
	return keys
}

// getBy checks GetBy(ExpTitle, title): the document of key ("":
// ErrNotFound alone).
func (x *ex) getBy(s *etagstore.Store[ExpCard], title, key string) {
	x.t.Helper()
	d, err := s.GetBy(x.t.Context(), ExpTitle, x.val(title))
	switch {
	case key == "" && err == nil:
		x.t.Errorf("at %v: GetBy(title %q) = %q (expires %v), want ErrNotFound", x.clock.Now(), title, d.Key, d.Expires)
	case key == "":
		wantIs(x.t, fmt.Sprintf("GetBy(title %q)", title), err, etagstore.ErrNotFound)
	case err != nil || d.Key != key:
		x.t.Errorf("at %v: GetBy(title %q) = %q, %v; want %q", x.clock.Now(), title, d.Key, err, key)
	default:
		wantExpires(x.t, "GetBy", d, d.Value.Until)
	}
}

// stamp is t as an expiry entry's value: milliseconds since 1970, 13
// digits.
func stamp(t time.Time) string { return fmt.Sprintf("%013d", t.UnixMilli()) }

// ExpCardProblems compares the entries of scope (unique "title", lookup
// "tag" and the Expiry index of ExpCard, whose name starts "xExpCard-")
// with the ones the cards stored under docPrefix imply, expired or not,
// and returns every difference; nil means they agree.
func ExpCardProblems(ctx context.Context, b driver.Backend, scope, docPrefix string) ([]string, error) {
	entries, err := ListEntries(ctx, b, scope)
	if err != nil {
		return nil, err
	}
	type triple struct{ index, value, doc string }
	const expiry = "expiry"
	want := map[triple]bool{}
	plain := etagstore.New[ExpCard](b, &etagstore.Options{CacheSize: -1})
	for d, err := range plain.List(ctx, docPrefix) {
		if err != nil {
			return nil, err
		}
		c := d.Value
		if c.Title != "" && c.Title != ExpPanic {
			want[triple{"title", c.Title, d.Key}] = true
		}
		if c.Tag != "" {
			want[triple{"tag", c.Tag, d.Key}] = true
		}
		if !c.Until.IsZero() {
			want[triple{expiry, stamp(c.Until), d.Key}] = true
		}
	}
	var problems []string
	got := map[triple]string{}
	names := map[string]bool{}
	for _, e := range entries {
		tr := triple{e.Index, e.Value, e.Doc}
		if strings.HasPrefix(e.Index, "xExpCard-") {
			names[e.Index] = true
			tr.index = expiry
		}
		if k, ok := got[tr]; ok {
			problems = append(problems, fmt.Sprintf("entry %+v stored twice: %+q and %+q", tr, k, e.Key))
		}
		got[tr] = e.Key
		if !want[tr] {
			problems = append(problems, fmt.Sprintf("orphan: entry %+q (%s %q → %q) has no document holding it", e.Key, e.Index, e.Value, e.Doc))
		}
	}
	if len(names) > 1 {
		problems = append(problems, fmt.Sprintf("expiry entries of %d index names: %v", len(names), names))
	}
	for tr := range want {
		if _, ok := got[tr]; !ok {
			problems = append(problems, fmt.Sprintf("missing: document %q holds %s %q without its entry", tr.doc, tr.index, tr.value))
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// wantEntries checks, where the backend keeps entries, that the entries
// of board b1's scope are exactly those of its stored documents.
func (x *ex) wantEntries() {
	x.t.Helper()
	if !x.entries() {
		return
	}
	scope := scopeOf(x.t, x.b, x.key("c"))
	problems, err := ExpCardProblems(x.t.Context(), x.b, scope, x.prefix())
	if err != nil {
		x.t.Fatalf("reading entries: %v", err)
	}
	for _, p := range problems {
		x.t.Error(p)
	}
}

// entriesOf is the entries of board b1's scope that name doc.
func (x *ex) entriesOf(doc string) []IndexEntry {
	x.t.Helper()
	es, err := ListEntries(x.t.Context(), x.b, scopeOf(x.t, x.b, x.key("c")))
	if err != nil {
		x.t.Fatal(err)
	}
	var out []IndexEntry
	for _, e := range es {
		if e.Doc == doc {
			out = append(out, e)
		}
	}
	return out
}

// testExpiryReadsHide: a document that expires at E is read, listed,
// paged and found by its values until E−1ms, each Doc saying it expires
// at E; from E, Get and GetBy match ErrNotFound and List, Page and ListBy
// skip it, on the Store that wrote it and on a fresh one. The others (one
// that never expires, one that expires later) stay.
func testExpiryReadsHide(t *testing.T, x *ex) {
	k1, k2, k3 := x.key("c1"), x.key("c2"), x.key("c3")
	c1 := ExpCard{Title: "t1", Tag: "red", Until: ExpAt}
	c2 := ExpCard{Title: "t2", Tag: "red"}
	c3 := ExpCard{Title: "t3", Tag: "red", Until: ExpAt.Add(time.Hour)}
	x.create(k1, c1)
	x.create(k2, c2)
	x.create(k3, c3)
	all := x.inOrder(k1, k2, k3)
	live := x.inOrder(k2, k3)

	// E − 1ms: everything is there.
	for _, s := range []*etagstore.Store[ExpCard]{x.s, x.store(x.clock)} {
		x.visible(s, k1, c1)
		x.visible(s, k2, c2)
		x.visible(s, k3, c3)
		x.wantKeys("List", x.listed(s), all...)
		x.wantKeys("Page(10)", x.paged(s, 10), all...)
		x.wantKeys("Page(1)", x.paged(s, 1), all...)
		if x.entries() {
			x.getBy(s, "t1", k1)
			x.getBy(s, "t2", k2)
			x.wantKeys("ListBy(tag red)", x.listedBy(s, ExpTag, x.val("red")), x.inOrder(k1, k2, k3)...)
		}
	}

	// E: k1 reads as missing everywhere; the others stay.
	x.at(ExpAt)
	for name, s := range map[string]*etagstore.Store[ExpCard]{"writer": x.s, "fresh": x.store(x.clock)} {
		t.Run(name, func(t *testing.T) {
			x := *x
			x.t = t
			x.hidden(s, k1)
			x.visible(s, k2, c2)
			x.visible(s, k3, c3)
			x.wantKeys("List", x.listed(s), live...)
			x.wantKeys("Page(10)", x.paged(s, 10), live...)
			x.wantKeys("Page(1)", x.paged(s, 1), live...)
			if x.entries() {
				x.getBy(s, "t1", "")
				x.getBy(s, "t2", k2)
				x.wantKeys("ListBy(tag red)", x.listedBy(s, ExpTag, x.val("red")), live...)
				x.wantKeys("ListBy(title t1)", x.listedBy(s, ExpTitle, x.val("t1")))
			}
		})
	}
	// Still stored: expiry hides it, Sweep deletes it.
	if d, ok := x.storedCard(k1); !ok || !sameCard(d.Value, c1) {
		t.Errorf("expired %q is no longer stored before any Sweep: %+v, %v", k1, d.Value, ok)
	}
	x.wantEntries()
}

// testExpiryStoreClock: expiry is judged by each Store's clock
// (Options.Clock), not the wall clock: at E a Store whose clock reads
// E−1ms still reads the document, one whose clock reads E does not.
func testExpiryStoreClock(t *testing.T, x *ex) {
	k := x.key("c1")
	c := ExpCard{Title: "t1", Until: ExpAt}
	x.create(k, c)
	x.at(ExpAt)
	behind := x.store(NewFakeClock(ExpAt.Add(-time.Millisecond)))
	x.visible(behind, k, c)
	x.hidden(x.s, k)
	// A document that expired before the wall clock's now reads as live
	// by a Store whose clock is earlier still.
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	kp := x.key("c2")
	old := x.store(NewFakeClock(past.Add(-time.Second)))
	cp := ExpCard{Title: "t2", Until: past}
	if _, err := old.Create(t.Context(), kp, cp); err != nil {
		t.Fatalf("Create(expiring in 2001): %v", err)
	}
	x.visible(old, kp, cp)
	x.hidden(x.s, kp)
}

// testExpiryPageSkips: a page skips the expired documents and the walk
// through every page yields each live document once, whatever the limit,
// with the expired ones first, between and last.
func testExpiryPageSkips(t *testing.T, x *ex) {
	var live []string
	for i := range 7 {
		k := x.key(fmt.Sprintf("c%d", i))
		c := ExpCard{Title: fmt.Sprintf("t%d", i), Until: ExpAt.Add(time.Hour)}
		if i%3 == 0 { // c0, c3, c6: first, between and last
			c.Until = ExpAt
		} else {
			live = append(live, k)
		}
		x.create(k, c)
	}
	x.at(ExpAt)
	live = x.inOrder(live...)
	for _, limit := range []int{1, 2, 3, 7, 100} {
		x.wantKeys(fmt.Sprintf("Page(%d) walked", limit), x.paged(x.s, limit), live...)
	}
	x.wantKeys("List", x.listed(x.s), live...)
}

// testExpiryPageFull: Page's documented promise, "exactly the limit asked
// for, unless the listing ended first", holds with expired documents in
// the listing: a page of 2 over [expired, live, live, live] holds two
// live documents.
func testExpiryPageFull(t *testing.T, x *ex) {
	var live []string
	for i := range 4 {
		k := x.key(fmt.Sprintf("c%d", i))
		c := ExpCard{Title: fmt.Sprintf("t%d", i)}
		if i == 0 {
			c.Until = ExpAt
		} else {
			live = append(live, k)
		}
		x.create(k, c)
	}
	x.at(ExpAt)
	p, err := x.s.Page(t.Context(), x.prefix(), 2, "")
	if err != nil {
		t.Fatalf("Page: %v", err)
	}
	var keys []string
	for _, d := range p.Docs {
		keys = append(keys, d.Key)
	}
	x.wantKeys("first Page(2)", keys, x.inOrder(live...)[:2]...)
}

// testExpiryNever: a document whose Expiry is the zero time never
// expires: Doc.Expires is zero, no expiry entry is written, it is read at
// any instant and no Sweep deletes it. A document whose expiry is moved
// to never by an Update loses its expiry entry.
func testExpiryNever(t *testing.T, x *ex) {
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	c1 := ExpCard{Title: "forever"}
	x.create(k1, c1)
	x.create(k2, ExpCard{Title: "until E", Until: ExpAt})
	d, err := x.s.Update(ctx, k2, func(c *ExpCard) error { c.Until = time.Time{}; return nil })
	if err != nil {
		t.Fatalf("Update to never: %v", err)
	}
	wantExpires(t, "Update", d, time.Time{})
	x.wantEntries()
	if x.entries() {
		for _, k := range []string{k1, k2} {
			for _, e := range x.entriesOf(k) {
				if e.Index != "title" {
					t.Errorf("%q, which never expires, holds entry %+v", k, e)
				}
			}
		}
	}
	x.at(time.Date(2286, 1, 1, 0, 0, 0, 0, time.UTC))
	x.visible(x.s, k1, c1)
	x.visible(x.s, k2, ExpCard{Title: "until E"})
	n, err := x.s.Sweep(ctx)
	if n != 0 || err != nil {
		t.Errorf("Sweep = %d, %v; want 0, nil", n, err)
	}
	x.visible(x.s, k1, c1)
}

// testExpiryRefresh: a document written before it expires with a later
// expiry (a refresh) stays readable past the first: its Doc says the new
// instant, its expiry entry moves, and a Sweep past the old instant
// leaves it.
func testExpiryRefresh(t *testing.T, x *ex) {
	ctx := t.Context()
	k := x.key("c1")
	x.create(k, ExpCard{Title: "t1", Tag: "red", Until: ExpAt})
	later := ExpAt.Add(time.Hour)
	d, err := x.s.Update(ctx, k, func(c *ExpCard) error { c.Until = later; return nil })
	if err != nil {
		t.Fatalf("Update (refresh): %v", err)
	}
	wantExpires(t, "Update", d, later)
	x.wantEntries()
	x.at(ExpAt.Add(time.Minute))
	want := ExpCard{Title: "t1", Tag: "red", Until: later}
	x.visible(x.s, k, want)
	if n, err := x.s.Sweep(ctx); n != 0 || err != nil {
		t.Errorf("Sweep past the old expiry = %d, %v; want 0, nil", n, err)
	}
	x.visible(x.s, k, want)
	if x.entries() {
		x.getBy(x.s, "t1", k)
		x.wantKeys("ListBy(tag red)", x.listedBy(x.s, ExpTag, x.val("red")), k)
	}
	x.wantEntries()
	x.at(later)
	x.hidden(x.s, k)
}

// testExpiryTransactReads: in a transaction (Store.Transact, and
// etagstore.Transact through s.In(tx)), Get of a document that has
// expired matches ErrNotFound and Delete of it too, as for a missing key;
// 1 ms before, Get returns it.
func testExpiryTransactReads(t *testing.T, x *ex) {
	if !x.commits() {
		x.wantNoTransact()
		return
	}
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	c1 := ExpCard{Title: "t1", Until: ExpAt}
	c2 := ExpCard{Title: "t2", Until: ExpAt.Add(time.Hour)}
	d1 := x.create(k1, c1)
	x.create(k2, c2)
	_, err := x.s.Transact(ctx, func(tx *etagstore.Tx[ExpCard]) error {
		v, err := tx.Get(k1)
		if err != nil || !sameCard(v, c1) {
			t.Errorf("at E−1ms: tx.Get(%q) = %+v, %v; want it", k1, v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	x.at(ExpAt)
	for name, s := range map[string]*etagstore.Store[ExpCard]{"writer": x.s, "fresh": x.store(x.clock)} {
		docs, err := s.Transact(ctx, func(tx *etagstore.Tx[ExpCard]) error {
			v, err := tx.Get(k1)
			if err == nil {
				t.Errorf("%s: at E: tx.Get(%q) = %+v, want ErrNotFound", name, k1, v)
			} else {
				wantIs(t, name+": at E: tx.Get", err, etagstore.ErrNotFound)
			}
			if v, err := tx.Get(k2); err != nil || !sameCard(v, c2) {
				t.Errorf("%s: tx.Get(%q) = %+v, %v; want it", name, k2, v, err)
			}
			if etag, err := tx.ETag(k1); err != nil || etag != "" {
				t.Errorf("%s: tx.ETag(expired) = %q, %v; want \"\" (missing), nil", name, etag, err)
			}
			err = tx.Delete(k1)
			if err == nil {
				t.Errorf("%s: tx.Delete(expired) = nil, want ErrNotFound", name)
			} else {
				wantIs(t, name+": tx.Delete(expired)", err, etagstore.ErrNotFound)
			}
			return nil
		})
		if err != nil || len(docs) != 0 {
			t.Errorf("%s: Transact = %v, %v; want no documents, nil", name, docs, err)
		}
		err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			v, err := s.In(tx).Get(k1)
			if err == nil {
				t.Errorf("%s: etagstore.Transact: In(tx).Get(expired) = %+v, want ErrNotFound", name, v)
			} else {
				wantIs(t, name+": etagstore.Transact: In(tx).Get(expired)", err, etagstore.ErrNotFound)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: etagstore.Transact = %v", name, err)
		}
	}
	x.unchanged(k1, d1.ETag)
}

// wantNoTransact checks that Transact is refused (errors.ErrUnsupported)
// on a backend that cannot commit several documents at once.
func (x *ex) wantNoTransact() {
	x.t.Helper()
	_, err := x.s.Transact(x.t.Context(), func(*etagstore.Tx[ExpCard]) error { return nil })
	if !errors.Is(err, errors.ErrUnsupported) {
		x.t.Errorf("Transact on a backend without Commit = %v, want errors.ErrUnsupported", err)
	}
}

// testExpiryTransactPut: a transaction's Put over an expired key commits,
// read first or not, as over a missing key; the new document is stored,
// with its own expiry, and its entries replace the old ones.
func testExpiryTransactPut(t *testing.T, x *ex) {
	if !x.commits() {
		x.wantNoTransact()
		return
	}
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	old1 := x.create(k1, ExpCard{Title: "old1", Tag: "red", Until: ExpAt})
	old2 := x.create(k2, ExpCard{Title: "old2", Tag: "red", Until: ExpAt})
	x.at(ExpAt)
	later := ExpAt.Add(time.Hour)
	n1 := ExpCard{Title: "new1", Tag: "blue", Until: later}
	n2 := ExpCard{Title: "new2", Until: later}
	docs, err := x.s.Transact(ctx, func(tx *etagstore.Tx[ExpCard]) error {
		if _, err := tx.Get(k1); !errors.Is(err, etagstore.ErrNotFound) {
			return fmt.Errorf("tx.Get(expired) = %v, want ErrNotFound", err)
		}
		if err := tx.Put(k1, n1); err != nil {
			return err
		}
		return tx.Put(k2, n2) // not read first
	})
	if err != nil {
		t.Fatalf("Transact Put over expired keys: %v", err)
	}
	if len(docs) != 2 {
		t.Fatalf("Transact returned %d documents, want 2", len(docs))
	}
	for _, d := range docs {
		wantExpires(t, "Transact", d, later)
	}
	x.visible(x.s, k1, n1)
	x.visible(x.fresh(), k2, n2)
	if it, _ := x.stored(k1); it.ETag == old1.ETag {
		t.Errorf("%q still holds the expired version", k1)
	}
	if it, _ := x.stored(k2); it.ETag == old2.ETag {
		t.Errorf("%q still holds the expired version", k2)
	}
	if x.entries() {
		x.getBy(x.s, "old1", "")
		x.getBy(x.s, "new1", k1)
		x.wantKeys("ListBy(tag red)", x.listedBy(x.s, ExpTag, x.val("red")))
		x.wantKeys("ListBy(tag blue)", x.listedBy(x.s, ExpTag, x.val("blue")), k1)
	}
	x.wantEntries()
}

// fresh is another Store of the case's options and clock: an empty cache.
func (x *ex) fresh() *etagstore.Store[ExpCard] { return x.store(x.clock) }

// testExpiryTransactCreate: a transaction's Create over an expired key
// commits, whether the transaction read the key first or not (an unread
// Create is conditioned on the key's absence, and the key holds a
// version): the new document is stored.
func testExpiryTransactCreate(t *testing.T, x *ex) {
	if !x.commits() {
		x.wantNoTransact()
		return
	}
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	x.create(k1, ExpCard{Title: "old1", Until: ExpAt})
	x.create(k2, ExpCard{Title: "old2", Until: ExpAt})
	x.at(ExpAt)
	later := ExpAt.Add(time.Hour)
	n1 := ExpCard{Title: "new1", Until: later}
	n2 := ExpCard{Title: "new2", Until: later}
	_, err := x.s.Transact(ctx, func(tx *etagstore.Tx[ExpCard]) error {
		if _, err := tx.Get(k1); !errors.Is(err, etagstore.ErrNotFound) {
			return fmt.Errorf("tx.Get(expired) = %v, want ErrNotFound", err)
		}
		return tx.Create(k1, n1)
	})
	if err != nil {
		t.Errorf("Transact: Create over an expired key read first = %v, want it to commit", err)
	} else {
		x.visible(x.fresh(), k1, n1)
	}
	docs, err := x.s.Transact(ctx, func(tx *etagstore.Tx[ExpCard]) error { return tx.Create(k2, n2) })
	if err != nil {
		t.Errorf("Transact: Create over an expired key not read = %v, want it to commit", err)
	} else {
		if len(docs) != 1 {
			t.Errorf("Transact returned %d documents, want 1", len(docs))
		} else {
			wantExpires(t, "Transact", docs[0], later)
		}
		x.visible(x.fresh(), k2, n2)
	}
	x.wantEntries()
}

// testExpiryCreateOver: Create over an expired document succeeds and
// stores the new one, with a new ETag and its own expiry; the expired
// version's ETag is spent.
func testExpiryCreateOver(t *testing.T, x *ex) {
	ctx := t.Context()
	k := x.key("c1")
	old := x.create(k, ExpCard{Title: "t1", Tag: "red", Until: ExpAt, N: 1})
	// Before E, it exists.
	_, err := x.s.Create(ctx, k, ExpCard{Title: "t1"})
	wantIs(t, "Create over a live document", err, etagstore.ErrExists)
	x.unchanged(k, old.ETag)
	x.at(ExpAt)
	later := ExpAt.Add(time.Hour)
	c := ExpCard{Title: "t1", Tag: "red", Until: later, N: 2}
	d, err := x.s.Create(ctx, k, c)
	if err != nil {
		t.Fatalf("Create over an expired document: %v", err)
	}
	wantExpires(t, "Create", d, later)
	if d.ETag == "" || d.ETag == old.ETag {
		t.Errorf("Create over expired: ETag %q, want a new one (old %q)", d.ETag, old.ETag)
	}
	got := x.visible(x.fresh(), k, c)
	if got.ETag != d.ETag {
		t.Errorf("Get after Create: ETag %q, want %q", got.ETag, d.ETag)
	}
	// The new document is live: Create is refused again.
	_, err = x.s.Create(ctx, k, ExpCard{Title: "third"})
	wantIs(t, "second Create over the new document", err, etagstore.ErrExists)
	// Its history goes on.
	d2, err := x.s.Update(ctx, k, func(c *ExpCard) error { c.N++; return nil })
	if err != nil || d2.Value.N != 3 {
		t.Fatalf("Update after Create over expired = %+v, %v", d2.Value, err)
	}
	wantExpires(t, "Update", d2, later)
	// Create over a key whose expired version was then deleted (swept)
	// creates.
	k2 := x.key("c2")
	x.create(k2, ExpCard{Title: "t2", Until: later})
	x.at(later.Add(time.Hour))
	if n, err := x.s.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 (both expired an hour ago)", n, err)
	}
	c2 := ExpCard{Title: "t2"}
	if _, err := x.s.Create(ctx, k2, c2); err != nil {
		t.Fatalf("Create after Sweep: %v", err)
	}
	x.visible(x.fresh(), k2, c2)
	x.wantEntries()
}

// ifMatchHook is a backend that calls hook once, before the first write
// of key (Write, or an action of a Commit) conditioned If-Match, once
// armed: a concurrent writer's window.
type ifMatchHook struct {
	driver.Backend
	key   string
	armed atomic.Bool
	once  sync.Once
	hook  func()
}

func (h *ifMatchHook) fire(key string, w driver.Write, del bool) {
	if !del && key == h.key && w.Cond.Kind == driver.CondIfMatch && h.armed.Load() {
		h.once.Do(h.hook)
	}
}

func (h *ifMatchHook) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	h.fire(key, w, false)
	return h.Backend.Write(ctx, key, w)
}

func (h *ifMatchHook) Abilities() driver.Abilities {
	a := h.Backend.Abilities()
	if commit := a.Commit; commit != nil {
		a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
			for _, ac := range actions {
				h.fire(ac.Key, ac.Write, ac.Delete || ac.Check)
			}
			return commit(ctx, actions)
		}
	}
	return a
}

// testExpiryCreateOverRefreshed: a Create over an expired document writes
// on that version's ETag, so that a refresh that lands between its read
// and its write (by a process whose clock is behind) wins: the Create
// matches ErrExists and the refresh stays.
func testExpiryCreateOverRefreshed(t *testing.T, x *ex) {
	ctx := t.Context()
	h := &ifMatchHook{Backend: x.b, key: x.key("c1")}
	s := x.storeOver(h, x.clock)
	k := x.key("c1")
	if _, err := s.Create(ctx, k, ExpCard{Title: "t1", Until: ExpAt}); err != nil {
		t.Fatal(err)
	}
	later := ExpAt.Add(time.Hour)
	refreshed := ExpCard{Title: "t1", Until: later, N: 7}
	behind := x.storeOver(x.b, NewFakeClock(ExpAt.Add(-time.Millisecond)))
	var refresh etagstore.Doc[ExpCard]
	var rerr error
	h.hook = func() {
		refresh, rerr = behind.Update(ctx, k, func(c *ExpCard) error { *c = refreshed; return nil })
	}
	h.armed.Store(true)
	x.at(ExpAt)
	_, err := s.Create(ctx, k, ExpCard{Title: "t1", Until: later, N: 99})
	if rerr != nil {
		t.Fatalf("the refresh: %v", rerr)
	}
	if refresh.ETag == "" {
		t.Fatal("the hook never ran: Create over the expired document sent no If-Match write")
	}
	wantIs(t, "Create over a document refreshed since its read", err, etagstore.ErrExists)
	x.unchanged(k, refresh.ETag)
	x.visible(x.fresh(), k, refreshed)
	x.wantEntries()
}

// testExpiryUpdateOver: Update of an expired key acts as for a missing
// one: ErrNotFound without running mutate, nothing written; with
// CreateIfMissing, mutate gets the zero T and the result replaces the
// expired version.
func testExpiryUpdateOver(t *testing.T, x *ex) {
	ctx := t.Context()
	k := x.key("c1")
	old := x.create(k, ExpCard{Title: "t1", Tag: "red", Until: ExpAt, N: 5})
	// E−1ms: it updates.
	d, err := x.s.Update(ctx, k, func(c *ExpCard) error { c.N++; return nil })
	if err != nil || d.Value.N != 6 {
		t.Fatalf("Update before E = %+v, %v", d.Value, err)
	}
	wantExpires(t, "Update", d, ExpAt)
	x.at(ExpAt)
	for name, s := range map[string]*etagstore.Store[ExpCard]{"writer": x.s, "fresh": x.fresh()} {
		ran := false
		_, err = s.Update(ctx, k, func(c *ExpCard) error { ran = true; c.N = 100; return nil })
		wantIs(t, name+": Update of an expired key", err, etagstore.ErrNotFound)
		if ran {
			t.Errorf("%s: Update of an expired key ran mutate", name)
		}
		x.unchanged(k, d.ETag)
	}
	later := ExpAt.Add(time.Hour)
	var seen *ExpCard
	d2, err := x.s.Update(ctx, k, func(c *ExpCard) error {
		cp := *c
		seen = &cp
		*c = ExpCard{Title: "t2", Until: later, N: 1}
		return nil
	}, etagstore.CreateIfMissing())
	if err != nil {
		t.Fatalf("Update(CreateIfMissing) of an expired key: %v", err)
	}
	if seen == nil || !sameCard(*seen, ExpCard{}) {
		t.Errorf("Update(CreateIfMissing) of an expired key: mutate got %+v, want the zero T", seen)
	}
	wantExpires(t, "Update(CreateIfMissing)", d2, later)
	x.visible(x.fresh(), k, ExpCard{Title: "t2", Until: later, N: 1})
	if d2.ETag == old.ETag || d2.ETag == d.ETag {
		t.Errorf("Update(CreateIfMissing) kept the expired ETag")
	}
	if x.entries() {
		x.getBy(x.s, "t1", "")
		x.getBy(x.s, "t2", k)
		x.wantKeys("ListBy(tag red)", x.listedBy(x.s, ExpTag, x.val("red")))
	}
	x.wantEntries()
}

// testExpiryUpsertOver: Upsert over an expired document replaces it.
func testExpiryUpsertOver(t *testing.T, x *ex) {
	ctx := t.Context()
	k := x.key("c1")
	old := x.create(k, ExpCard{Title: "t1", Tag: "red", Until: ExpAt})
	x.at(ExpAt)
	later := ExpAt.Add(time.Hour)
	c := ExpCard{Title: "t2", Tag: "blue", Until: later}
	d, err := x.s.Upsert(ctx, k, c)
	if err != nil {
		t.Fatalf("Upsert over an expired document: %v", err)
	}
	wantExpires(t, "Upsert", d, later)
	if d.ETag == old.ETag {
		t.Error("Upsert kept the expired ETag")
	}
	x.visible(x.fresh(), k, c)
	if x.entries() {
		x.getBy(x.s, "t1", "")
		x.getBy(x.s, "t2", k)
		x.wantKeys("ListBy(tag red)", x.listedBy(x.s, ExpTag, x.val("red")))
	}
	x.wantEntries()
}

// testExpiryReplaceOver: Replace and Save of an expired document match
// ErrNotFound, as for a missing one, whichever Doc they hold: the one a
// read returned before E, one built by hand with its ETag, one with
// ETagAny. Nothing is written. Before E the same Replace succeeds.
func testExpiryReplaceOver(t *testing.T, x *ex) {
	ctx := t.Context()
	k, k2 := x.key("c1"), x.key("c2")
	x.create(k, ExpCard{Title: "t1", Until: ExpAt})
	x.create(k2, ExpCard{Title: "t2", Until: ExpAt})
	read := x.visible(x.s, k, ExpCard{Title: "t1", Until: ExpAt})
	// Before E, a Replace of the other works (and says its expiry).
	r2 := x.visible(x.s, k2, ExpCard{Title: "t2", Until: ExpAt})
	r2.Value.N = 1
	r2, err := x.s.Replace(ctx, r2)
	if err != nil {
		t.Fatalf("Replace before E: %v", err)
	}
	wantExpires(t, "Replace", r2, ExpAt)
	x.at(ExpAt)
	edited := read
	edited.Value.N = 42
	forms := map[string]etagstore.Doc[ExpCard]{
		"the Doc read":          edited,
		"a Doc built by hand":   {Key: k, Value: ExpCard{Title: "t1", N: 42}, ETag: read.ETag},
		"ETagAny":               {Key: k, Value: ExpCard{Title: "t1", N: 42}, ETag: etagstore.ETagAny},
		"the other, Doc read":   {Key: k2, Value: ExpCard{Title: "t2", N: 42}, ETag: r2.ETag, Extra: r2.Extra},
		"the other, hand-built": {Key: k2, Value: ExpCard{Title: "t2", N: 42}, ETag: r2.ETag},
	}
	for name, s := range map[string]*etagstore.Store[ExpCard]{"writer": x.s, "fresh": x.fresh()} {
		for form, d := range forms {
			_, err := s.Replace(ctx, d)
			wantIs(t, fmt.Sprintf("%s: Replace(%s) of an expired document", name, form), err, etagstore.ErrNotFound)
		}
		_, err := s.Save(ctx, read, edited.Value, nil)
		wantIs(t, name+": Save of an expired document", err, etagstore.ErrNotFound)
	}
	x.unchanged(k, read.ETag)
	x.unchanged(k2, r2.ETag)
	x.hidden(x.s, k)
	x.wantEntries()
}

// testExpiryDeleteOver: Delete of an expired document matches
// ErrNotFound, with its ETag (from a read, or by hand on a fresh Store)
// or ETagAny, as for a missing key; nothing is deleted: Sweep's to do.
func testExpiryDeleteOver(t *testing.T, x *ex) {
	ctx := t.Context()
	k := x.key("c1")
	d := x.create(k, ExpCard{Title: "t1", Tag: "red", Until: ExpAt})
	x.at(ExpAt)
	for name, s := range map[string]*etagstore.Store[ExpCard]{"writer": x.s, "fresh": x.fresh()} {
		for _, etag := range []etagstore.ETag{d.ETag, etagstore.ETagAny} {
			err := s.Delete(ctx, k, etag)
			wantIs(t, fmt.Sprintf("%s: Delete(expired, %s)", name, etag), err, etagstore.ErrNotFound)
		}
	}
	x.unchanged(k, d.ETag)
	x.wantEntries()
	// Before E, Delete with the same ETag works (a control).
	k2 := x.key("c2")
	x.at(ExpAt.Add(-time.Millisecond))
	d2 := x.create(k2, ExpCard{Title: "t2", Until: ExpAt})
	if err := x.s.Delete(ctx, k2, d2.ETag); err != nil {
		t.Fatalf("Delete before E: %v", err)
	}
	if _, ok := x.stored(k2); ok {
		t.Errorf("%q stored after its Delete", k2)
	}
	x.wantEntries()
}

// testExpiryUniqueAfterCreateOver: a Create over an expired document
// with another unique value frees the old value (another document takes
// it) and GetBy of the new value finds the new document; lookup entries
// move likewise.
func testExpiryUniqueAfterCreateOver(t *testing.T, x *ex) {
	if !x.entries() {
		t.Log("no index entries on this backend: only Expiry is declared")
		return
	}
	ctx := t.Context()
	ka, kb := x.key("a"), x.key("b")
	x.create(ka, ExpCard{Title: "old", Tag: "red", Until: ExpAt})
	x.at(ExpAt)
	later := ExpAt.Add(time.Hour)
	if _, err := x.s.Create(ctx, ka, ExpCard{Title: "new", Tag: "blue", Until: later}); err != nil {
		t.Fatalf("Create over expired with another title: %v", err)
	}
	x.getBy(x.s, "old", "")
	x.getBy(x.s, "new", ka)
	if _, err := x.s.Create(ctx, kb, ExpCard{Title: "old", Tag: "red"}); err != nil {
		t.Fatalf("Create of another document with the freed title: %v", err)
	}
	x.getBy(x.s, "old", kb)
	x.getBy(x.fresh(), "new", ka)
	x.wantKeys("ListBy(tag red)", x.listedBy(x.s, ExpTag, x.val("red")), kb)
	x.wantKeys("ListBy(tag blue)", x.listedBy(x.s, ExpTag, x.val("blue")), ka)
	x.wantEntries()
}

// testExpirySweep: of three documents, one expired (past the default
// skew), one not yet, one never, Sweep deletes the first alone and
// returns 1; the others stay readable; a second Sweep deletes nothing.
func testExpirySweep(t *testing.T, x *ex) {
	ctx := t.Context()
	k1, k2, k3 := x.key("c1"), x.key("c2"), x.key("c3")
	c2 := ExpCard{Title: "t2", Tag: "red", Until: ExpAt.Add(time.Hour)}
	c3 := ExpCard{Title: "t3", Tag: "red"}
	x.create(k1, ExpCard{Title: "t1", Tag: "red", Until: ExpAt})
	x.create(k2, c2)
	x.create(k3, c3)
	x.at(ExpAt.Add(time.Minute))
	n, err := x.s.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1, nil", n, err)
	}
	if d, ok := x.storedCard(k1); ok {
		t.Errorf("swept %q is still stored: %+v", k1, d.Value)
	}
	x.visible(x.s, k2, c2)
	x.visible(x.s, k3, c3)
	x.visible(x.fresh(), k2, c2)
	if n, err := x.s.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0, nil", n, err)
	}
	x.visible(x.s, k2, c2)
	x.visible(x.s, k3, c3)
	x.wantEntries()
}

// testExpirySweepEntries: Sweep deletes every entry of the documents it
// deletes (expiry, unique, lookup) and no other: none remains naming a
// swept document, and their unique values are free again.
func testExpirySweepEntries(t *testing.T, x *ex) {
	if !x.entries() {
		t.Log("no index entries on this backend")
		return
	}
	ctx := t.Context()
	var gone []string
	for i := range 5 {
		k := x.key(fmt.Sprintf("c%d", i))
		c := ExpCard{Title: fmt.Sprintf("t%d", i), Tag: "red", Until: ExpAt.Add(time.Duration(i) * time.Second)}
		if i == 4 {
			c.Until = ExpAt.Add(time.Hour)
		} else {
			gone = append(gone, k)
		}
		x.create(k, c)
	}
	if got := len(x.entriesOf(gone[0])); got != 3 {
		t.Fatalf("%q holds %d entries before the Sweep, want 3 (title, tag, expiry)", gone[0], got)
	}
	x.at(ExpAt.Add(time.Minute))
	n, err := x.s.Sweep(ctx)
	if err != nil || n != 4 {
		t.Fatalf("Sweep = %d, %v; want 4, nil", n, err)
	}
	for _, k := range gone {
		if es := x.entriesOf(k); len(es) != 0 {
			t.Errorf("swept %q still has entries: %+v", k, es)
		}
	}
	if got := len(x.entriesOf(x.key("c4"))); got != 3 {
		t.Errorf("%q, not swept, holds %d entries, want 3", x.key("c4"), got)
	}
	x.wantEntries()
	x.getBy(x.s, "t0", "")
	x.wantKeys("ListBy(tag red)", x.listedBy(x.s, ExpTag, x.val("red")), x.key("c4"))
	if _, err := x.s.Create(ctx, x.key("d0"), ExpCard{Title: "t0"}); err != nil {
		t.Errorf("Create with a swept document's title: %v", err)
	}
	x.getBy(x.s, "t0", x.key("d0"))
	x.wantEntries()
}

// testExpirySweepSkew: Sweep deletes a document only once it has been
// expired Options.ExpirySkew by the clock (default 5s; negative: none),
// while reads hide it from its expiry. Every form: left out (0), given
// as 5s and 2s, negative.
func testExpirySweepSkew(t *testing.T, x *ex) {
	for _, f := range []struct {
		name string
		skew time.Duration
		wait time.Duration // the skew in force
	}{
		{"default", 0, 5 * time.Second},
		{"5s", 5 * time.Second, 5 * time.Second},
		{"2s", 2 * time.Second, 2 * time.Second},
		{"negative", -time.Second, 0},
	} {
		t.Run(f.name, func(t *testing.T) {
			ctx := t.Context()
			y := *x
			y.t = t
			y.opts.ExpirySkew = f.skew
			y.clock = NewFakeClock(ExpAt.Add(-time.Millisecond))
			y.s = y.store(y.clock)
			k := y.key("skew-" + f.name)
			y.create(k, ExpCard{Title: "t-" + f.name, Until: ExpAt})
			// Not yet expired: nothing to sweep.
			if n, err := y.s.Sweep(ctx); n != 0 || err != nil {
				t.Errorf("at E−1ms: Sweep = %d, %v; want 0, nil", n, err)
			}
			if f.wait > 0 {
				// Expired (hidden) but within the skew: not swept, at E,
				// 1s after, and 1ms before the skew ends.
				for _, at := range []time.Time{ExpAt, ExpAt.Add(min(time.Second, f.wait-time.Millisecond)), ExpAt.Add(f.wait - time.Millisecond)} {
					y.at(at)
					y.hidden(y.s, k)
					if n, err := y.s.Sweep(ctx); n != 0 || err != nil {
						t.Errorf("at E+%v (skew %v): Sweep = %d, %v; want 0, nil", at.Sub(ExpAt), f.wait, n, err)
					}
					if _, ok := y.storedCard(k); !ok {
						t.Fatalf("at E+%v (skew %v): swept within the skew", at.Sub(ExpAt), f.wait)
					}
				}
			}
			y.at(ExpAt.Add(f.wait))
			if n, err := y.s.Sweep(ctx); n != 1 || err != nil {
				t.Errorf("at E+%v (skew %v): Sweep = %d, %v; want 1, nil", f.wait, f.wait, n, err)
			}
			if _, ok := y.storedCard(k); ok {
				t.Errorf("at E+%v: still stored after the Sweep", f.wait)
			}
			y.wantEntries()
		})
	}
}

// testExpirySweepWithoutExpiry: Sweep and SweepEvery on a Store without
// an Expiry index match ErrInvalidInput at once; nothing is deleted.
func testExpirySweepWithoutExpiry(t *testing.T, x *ex) {
	ctx := t.Context()
	k := x.key("c1")
	x.create(k, ExpCard{Title: "t1", Until: ExpAt})
	x.at(ExpAt.Add(time.Hour))
	stores := map[string]*etagstore.Store[ExpCard]{"no index": x.plain()}
	if x.entries() {
		stores["unique and lookup only"] = etagstore.New[ExpCard](x.b, withErrorLines(t, etagstore.Options{Clock: x.clock}), ExpTitle, ExpTag)
	}
	for name, s := range stores {
		n, err := s.Sweep(ctx)
		wantIs(t, name+": Sweep", err, etagstore.ErrInvalidInput)
		if n != 0 {
			t.Errorf("%s: Sweep = %d, want 0", name, n)
		}
		wantIs(t, name+": SweepEvery", s.SweepEvery(ctx, time.Minute, nil), etagstore.ErrInvalidInput)
	}
	if _, ok := x.storedCard(k); !ok {
		t.Errorf("%q deleted by a Store without an Expiry index", k)
	}
}

// testExpiryTwoIndexes: a Store with two Expiry indexes (or an Expiry
// without a function) is misdeclared: every write matches
// ErrInvalidInput and writes nothing, and so does Sweep.
func testExpiryTwoIndexes(t *testing.T, x *ex) {
	ctx := t.Context()
	other := etagstore.Expiry(func(c ExpCard) time.Time { return c.Until.Add(time.Hour) })
	bad := map[string][]etagstore.Index[ExpCard]{
		"two Expiry indexes":  {ExpUntil, other},
		"the same one twice":  {ExpUntil, ExpUntil},
		"Expiry(nil)":         {etagstore.Expiry[ExpCard](nil)},
		"two beside a Unique": {ExpUntil, other},
	}
	if x.entries() {
		bad["two beside a Unique"] = []etagstore.Index[ExpCard]{ExpTitle, ExpUntil, other}
	}
	k := x.key("c1")
	for why, defs := range bad {
		s := etagstore.New[ExpCard](x.b, withErrorLines(t, etagstore.Options{Clock: x.clock}), defs...)
		c := ExpCard{Title: "x", Until: ExpAt}
		errs := map[string]error{}
		_, errs["Create"] = s.Create(ctx, k, c)
		_, errs["Upsert"] = s.Upsert(ctx, k, c)
		_, errs["Update(CreateIfMissing)"] = s.Update(ctx, k, func(v *ExpCard) error { *v = c; return nil }, etagstore.CreateIfMissing())
		if x.commits() {
			_, errs["Transact"] = s.Transact(ctx, func(tx *etagstore.Tx[ExpCard]) error { return tx.Put(k, c) })
		}
		_, errs["Sweep"] = s.Sweep(ctx)
		for op, err := range errs {
			wantIs(t, why+": "+op, err, etagstore.ErrInvalidInput)
		}
		if _, ok := x.stored(k); ok {
			t.Fatalf("%s: %q written despite the refusal", why, k)
		}
	}
	// Writes of a document that exists are refused too, and leave it.
	d := x.create(k, ExpCard{Title: "x", Until: ExpAt})
	s := etagstore.New[ExpCard](x.b, withErrorLines(t, etagstore.Options{Clock: x.clock}), ExpUntil, other)
	d.Value.N = 9
	errs := map[string]error{}
	_, errs["Replace"] = s.Replace(ctx, d)
	_, errs["Update"] = s.Update(ctx, k, func(v *ExpCard) error { v.N = 9; return nil })
	errs["Delete"] = s.Delete(ctx, k, d.ETag)
	for op, err := range errs {
		wantIs(t, "two Expiry indexes: "+op, err, etagstore.ErrInvalidInput)
	}
	x.unchanged(k, d.ETag)
	x.wantEntries()
}

// testExpiryPanics: an Expiry function that panics fails the write asking
// with ErrInvalidInput and writes nothing; a read of a stored document it
// panics on matches ErrInvalidInput too. The Store goes on.
func testExpiryPanics(t *testing.T, x *ex) {
	ctx := t.Context()
	k1, k2 := x.key("c1"), x.key("c2")
	p := ExpCard{Title: ExpPanic, Until: ExpAt}
	for _, w := range []struct {
		op    string
		write func(key string) error
	}{
		{"Create", func(k string) error { _, err := x.s.Create(ctx, k, p); return err }},
		{"Upsert", func(k string) error { _, err := x.s.Upsert(ctx, k, p); return err }},
		{"Update(CreateIfMissing)", func(k string) error {
			_, err := x.s.Update(ctx, k, func(c *ExpCard) error { *c = p; return nil }, etagstore.CreateIfMissing())
			return err
		}},
	} {
		k := x.key("p" + strings.ToLower(w.op[:3]))
		err := w.write(k)
		wantIs(t, w.op+" with a panicking Expiry function", err, etagstore.ErrInvalidInput)
		if _, ok := x.stored(k); ok {
			t.Errorf("%s: %q written despite the panic", w.op, k)
		}
	}
	// Writes of live documents to a value the function panics on.
	k4 := x.key("c4")
	fine := map[string]ExpCard{k2: {Title: "fine2", Until: ExpAt}, k4: {Title: "fine4", Until: ExpAt}}
	d2, d4 := x.create(k2, fine[k2]), x.create(k4, fine[k4])
	_, err := x.s.Update(ctx, k2, func(c *ExpCard) error { c.Title = ExpPanic; return nil })
	wantIs(t, "Update to a value the Expiry function panics on", err, etagstore.ErrInvalidInput)
	r := d4
	r.Value.Title = ExpPanic
	_, err = x.s.Replace(ctx, r)
	wantIs(t, "Replace with a value the Expiry function panics on", err, etagstore.ErrInvalidInput)
	if x.commits() {
		_, err = x.s.Transact(ctx, func(tx *etagstore.Tx[ExpCard]) error { return tx.Put(k1, p) })
		wantIs(t, "Transact Put with a panicking Expiry function", err, etagstore.ErrInvalidInput)
		if _, ok := x.stored(k1); ok {
			t.Errorf("%q written by Transact despite the panic", k1)
		}
	}
	for _, d := range []etagstore.Doc[ExpCard]{d2, d4} {
		if it, ok := x.stored(d.Key); !ok || it.ETag != d.ETag {
			t.Errorf("%q: stored %q (present %v), want the version %q untouched", d.Key, it.ETag, ok, d.ETag)
			continue
		}
		x.visible(x.s, d.Key, fine[d.Key])
	}
	x.wantEntries()
	// A document stored by a Store without the index, which the function
	// panics on: reading it through the Store matches ErrInvalidInput.
	k3 := x.key("c3")
	if _, err := x.plain().Create(ctx, k3, p); err != nil {
		t.Fatal(err)
	}
	_, err = x.s.Get(ctx, k3)
	wantIs(t, "Get of a document the Expiry function panics on", err, etagstore.ErrInvalidInput)
}

// testExpiryNotForGetBy: GetBy and ListBy with an Expiry index match
// ErrInvalidInput (it is Sweep's to read), ListBy yielding the error
// once.
func testExpiryNotForGetBy(t *testing.T, x *ex) {
	ctx := t.Context()
	k := x.key("c1")
	x.create(k, ExpCard{Title: "t1", Until: ExpAt})
	for _, v := range []string{x.val(stamp(ExpAt)), x.val(""), stamp(ExpAt)} {
		_, err := x.s.GetBy(ctx, ExpUntil, v)
		wantIs(t, fmt.Sprintf("GetBy(Expiry, %q)", v), err, etagstore.ErrInvalidInput)
		n := 0
		for d, err := range x.s.ListBy(ctx, ExpUntil, v) {
			n++
			if err == nil {
				t.Errorf("ListBy(Expiry, %q) yielded %q", v, d.Key)
				continue
			}
			wantIs(t, fmt.Sprintf("ListBy(Expiry, %q)", v), err, etagstore.ErrInvalidInput)
		}
		if n != 1 {
			t.Errorf("ListBy(Expiry, %q) yielded %d times, want the error once", v, n)
		}
	}
}
