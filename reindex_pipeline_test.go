package etagstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// reindexGate is a backend whose commits of index entries alone (a
// Reindex's batches and repairs; a Store's writes carry their document)
// and ListPage calls the test steers. hold and then fail, when set, are
// called by each such commit before it is sent, with its rank (1, 2,
// …), and fail's error is its answer; listed is called by each
// ListPage, with its after; relisted by each VersionsBetween, with its
// bounds, before it is sent; lose, when set, by each such commit once it
// is answered, and its error, if any, replaces the answer (a lost one).
type reindexGate struct {
	driver.Backend
	hold     func(rank int)
	listed   func(after string)
	fail     func(rank int) error
	relisted func(after, through string)
	lose     func(rank int, acts []driver.Action) error

	mu          sync.Mutex
	rank        int
	inFlight    int // entry commits sent and not answered
	maxInFlight int // the most at once
}

func (g *reindexGate) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	if g.listed != nil {
		g.listed(after)
	}
	return g.Backend.ListPage(ctx, prefix, after, limit)
}

func (g *reindexGate) Abilities() driver.Abilities {
	a := g.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, acts []driver.Action) ([]driver.ETag, error) {
		for _, act := range acts {
			if !strings.HasPrefix(act.Key, "\uFFFF") {
				return commit(ctx, acts) // a Store's write
			}
		}
		g.mu.Lock()
		g.rank++
		rank := g.rank
		g.inFlight++
		g.maxInFlight = max(g.maxInFlight, g.inFlight)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.inFlight--
			g.mu.Unlock()
		}()
		if g.hold != nil {
			g.hold(rank)
		}
		if g.fail != nil {
			if err := g.fail(rank); err != nil {
				return nil, err
			}
		}
		etags, err := commit(ctx, acts)
		if g.lose != nil && err == nil {
			if lost := g.lose(rank, acts); lost != nil {
				return nil, lost
			}
		}
		return etags, err
	}
	if between := a.VersionsBetween; between != nil && g.relisted != nil {
		a.VersionsBetween = func(ctx context.Context, after, through string) ([]driver.Item, error) {
			g.relisted(after, through)
			return between(ctx, after, through)
		}
	}
	return a
}

// titleEntries lists b's entries of the title index: the document each
// value's entry names.
func titleEntries(t *testing.T, b driver.Backend) map[string]string {
	t.Helper()
	got := map[string]string{}
	sp := b.Abilities().Entries
	for it, err := range b.List(context.Background(), sp.Key("", "u.title.")) {
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Value, Doc string }
		if err := json.Unmarshal(it.Data, &e); err != nil {
			t.Fatal(err)
		}
		got[e.Value] = e.Doc
	}
	return got
}

// seedCards stores n cards k0000, k0001, … titled t0, t1, … without
// the index, and returns the entries a Reindex must make: title to key.
func seedCards(t *testing.T, b driver.Backend, n int) map[string]string {
	t.Helper()
	plain := etagstore.New[card](b, nil)
	want := map[string]string{}
	for i := range n {
		k, title := fmt.Sprintf("k%04d", i), fmt.Sprint("t", i)
		if _, err := plain.Create(t.Context(), k, card{Title: title}); err != nil {
			t.Fatal(err)
		}
		want[title] = k
	}
	return want
}

// wantTitleEntries checks that b's entries of the title index are want
// (title to key), naming each difference.
func wantTitleEntries(t *testing.T, b driver.Backend, want map[string]string) {
	t.Helper()
	got := titleEntries(t, b)
	for v, k := range got {
		if want[v] != k {
			t.Errorf("entry %q names %q, want %q", v, k, want[v])
		}
	}
	for v, k := range want {
		if _, ok := got[v]; !ok {
			t.Errorf("no entry %q (of %q)", v, k)
		}
	}
}

// reindexing runs cards.Reindex of byTitle in a goroutine, and hands its
// error over on the channel it returns.
func reindexing(ctx context.Context, cards *etagstore.Store[card]) <-chan error {
	done := make(chan error, 1)
	go func() { done <- cards.Reindex(ctx, byTitle) }()
	return done
}

// waitFor receives from ch, failing the test if nothing comes in a
// minute (a bound on a broken pass, not a pace).
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
		panic("unreachable")
	}
}

// TestReindexConcurrentWriter: documents a declaring writer changes after
// Reindex listed their page and before its batches commit (held at a
// gate while it writes) end with exactly the entries they hold: the
// renamed one its new title alone, the deleted one none, the emptied
// one none, the created one its own. Entries of the old values, which
// the batches made, are found by listing the page again and deleted.
func TestReindexConcurrentWriter(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	g := &reindexGate{Backend: mem, hold: func(rank int) {
		once.Do(func() { close(arrived) })
		<-release
	}}
	want := seedCards(t, g, 2500) // three pages: the writes hit the first
	cards := etagstore.New(g, nil, byTitle)
	done := reindexing(ctx, cards)
	waitFor(t, arrived, "Reindex batch")
	if _, err := cards.Update(ctx, "k0003", func(c *card) error { c.Title = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	d, err := cards.Get(ctx, "k0005")
	if err != nil {
		t.Fatal(err)
	}
	if err := cards.Delete(ctx, "k0005", d.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := cards.Update(ctx, "k0007", func(c *card) error { c.Title = ""; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := cards.Create(ctx, "k0001x", card{Title: "new"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := waitFor(t, done, "end of Reindex"); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	delete(want, "t3")
	delete(want, "t5")
	delete(want, "t7")
	want["renamed"], want["new"] = "k0003", "k0001x"
	wantTitleEntries(t, mem, want)
}

// TestReindexListsAhead: the next page is listed while the current
// page's batches go. The first batch of the first page waits at a gate
// until the second page's listing has started (after the first page's
// last key); the pass then makes every entry.
func TestReindexListsAhead(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 1500) // pages of 999 and 501
	arrived, release := make(chan struct{}), make(chan struct{})
	secondPage := make(chan string, 1)
	g := &reindexGate{Backend: mem,
		hold: func(rank int) {
			if rank == 1 {
				close(arrived)
				<-release
			}
		},
		listed: func(after string) {
			if after != "" {
				select {
				case secondPage <- after:
				default:
				}
			}
		},
	}
	cards := etagstore.New(g, nil, byTitle)
	done := reindexing(ctx, cards)
	waitFor(t, arrived, "first batch")
	if after := waitFor(t, secondPage, "listing of the second page while the first batch is held"); after != "k0998" {
		t.Errorf("the page listed ahead starts after %q, want k0998 (the first page's last key)", after)
	}
	close(release)
	if err := waitFor(t, done, "end of Reindex"); err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	wantTitleEntries(t, mem, want)
}

// TestReindexBatchFailure: a batch that fails ends the pass with its
// error (its sentinel), with the next page listed ahead, and a second
// Reindex makes every entry.
func TestReindexBatchFailure(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 1500)
	refused := fmt.Errorf("%w: refused by the test", driver.ErrUnavailable)
	g := &reindexGate{Backend: mem, fail: func(rank int) error {
		if rank == 3 {
			return refused
		}
		return nil
	}}
	cards := etagstore.New(g, nil, byTitle)
	if err := cards.Reindex(ctx, byTitle); !errors.Is(err, etagstore.ErrUnavailable) || errors.Is(err, etagstore.ErrExists) {
		t.Fatalf("Reindex with a failing batch: %v, want the batch's ErrUnavailable", err)
	}
	g.mu.Lock()
	inFlight := g.inFlight
	g.mu.Unlock()
	if inFlight != 0 {
		t.Errorf("%d batches in flight after Reindex returned", inFlight)
	}
	g.fail = nil
	if err := cards.Reindex(ctx, byTitle); err != nil {
		t.Fatalf("second Reindex: %v", err)
	}
	wantTitleEntries(t, mem, want)
}

// versionsCount is a backend that counts the listings of documents (not
// of entries) by ListPage, and those by Abilities.VersionsBetween with
// their bounds.
type versionsCount struct {
	driver.Backend
	mu        sync.Mutex
	listPages int
	between   [][2]string
}

func (v *versionsCount) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	if !strings.HasPrefix(prefix, "\uFFFF") {
		v.mu.Lock()
		v.listPages++
		v.mu.Unlock()
	}
	return v.Backend.ListPage(ctx, prefix, after, limit)
}

func (v *versionsCount) Abilities() driver.Abilities {
	a := v.Backend.Abilities()
	if vb := a.VersionsBetween; vb != nil {
		a.VersionsBetween = func(ctx context.Context, after, through string) ([]driver.Item, error) {
			v.mu.Lock()
			v.between = append(v.between, [2]string{after, through})
			v.mu.Unlock()
			return vb(ctx, after, through)
		}
	}
	return a
}

// TestReindexRelistsVersions: each page is listed once with its data,
// and listed again, once its entries are written, with the keys and
// ETags alone, bounded by the page's first and last keys
// (Abilities.VersionsBetween), which is all the recheck reads.
func TestReindexRelistsVersions(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	want := seedCards(t, mem, 1500) // pages of 999 and 501
	b := &versionsCount{Backend: mem}
	cards := etagstore.New(b, nil, byTitle)
	if err := cards.Reindex(ctx, byTitle); err != nil {
		t.Fatal(err)
	}
	wantBetween := [][2]string{{"", "k0998"}, {"k0998", "k1499"}}
	if b.listPages != 2 || !slices.Equal(b.between, wantBetween) {
		t.Errorf("Reindex of 2 pages: %d ListPage listings of documents and VersionsBetween %q, want 2 and %q", b.listPages, b.between, wantBetween)
	}
	wantTitleEntries(t, mem, want)
}
