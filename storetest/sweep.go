package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	"github.com/etagstore/etagstore/internal/index"
)

// This file races the sweeper of expired documents (Store.Sweep,
// Store.SweepEvery) against refreshes, against other sweepers and
// through faults, and checks exact counts and the entries at the end.
// Every clock is a fake one the case sets; goroutines are steered by
// gates on the backend's requests, never by sleeps.

// SweepRig builds the backends of the sweeper's cases (RunSweep).
type SweepRig struct {
	// New returns an empty backend of its own.
	New NewBackend
	// Pair returns the i-th backend of the refresh races, apart from every
	// other (its own memstore, a partition of one table, a prefix of one
	// container): each worker runs its pairs one after another over one,
	// and takes a fresh one every swEnvPairs pairs and after a pair that
	// failed. Nil: New.
	Pair func(t *testing.T, i int) driver.Backend
	// Faulty returns a backend whose requests meet f, and one over the
	// same storage that meets none, and the faults' counts. Nil skips the
	// fault case.
	Faulty func(t *testing.T, f Faults) (faulty, direct driver.Backend, counts func() map[string]int)
	// Locks returns two Lockers of one lock space, as two processes
	// hold them. Nil: the harness's own, in memory.
	Locks func(t *testing.T) (etagstore.Locker, etagstore.Locker)
	// Pairs is how many refresh races run (default 10,000); Workers, how
	// many at once (default 8).
	Pairs, Workers int
	// Docs is how many documents the sweepers' and the faults' cases
	// hold (default 400).
	Docs int
}

// RunSweep runs every case of the sweeper.
func RunSweep(t *testing.T, r SweepRig) {
	t.Run("Races", r.Races)
	t.Run("Sweepers/Two", func(t *testing.T) { r.Sweepers(t, 2) })
	t.Run("Sweepers/Four", func(t *testing.T) { r.Sweepers(t, 4) })
	if r.Faulty != nil {
		t.Run("Faults", r.Faults)
	}
	t.Run("Every", r.Every)
	t.Run("BadInput", r.BadInput)
	t.Run("Cutoff", r.Cutoff)
}

// sweepDoc is the document type of the cases: it expires at Until
// (milliseconds since 1970; 0: never); its Name is unique (swByName) and
// its Owner looked up (swByOwner), so that a sweep has every kind of
// entry to delete with it.
type sweepDoc struct {
	Name  string
	Owner string
	Until int64
	N     int64
}

var (
	swByName  = etagstore.Unique("sname", func(d sweepDoc) string { return d.Name })
	swByOwner = etagstore.Lookup("sowner", func(d sweepDoc) []string { return []string{d.Owner} })
	swExpiry  = etagstore.Expiry(func(d sweepDoc) time.Time {
		if d.Until == 0 {
			return time.Time{}
		}
		return time.UnixMilli(d.Until)
	})
)

// swExpiryIndex starts the name of sweepDoc's Expiry index as its
// entries hold it ("x", the type's name, "-", a hash).
const swExpiryIndex = "xsweepDoc-"

// The instants of the cases: documents are written at swT0 and expire a
// minute later; the sweepers' clock reads two minutes past swT0 (beyond
// the default ExpirySkew of 5 s); a refresh moves the expiry an hour on;
// the last sweep runs two hours on, when every refreshed one has passed.
var (
	swT0      = time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
	swExpires = swT0.Add(time.Minute)
	swSweepAt = swT0.Add(2 * time.Minute)
	swLater   = swT0.Add(time.Hour)
	swLast    = swT0.Add(2 * time.Hour)
)

// swStore is a Store of sweepDocs over b with its indexes: the three
// where b keeps entries, the Expiry alone where it keeps none (blobs).
func swStore(b driver.Backend, o etagstore.Options) *etagstore.Store[sweepDoc] {
	if b.Abilities().Entries == nil {
		return etagstore.New[sweepDoc](b, &o, swExpiry)
	}
	return etagstore.New[sweepDoc](b, &o, swByName, swByOwner, swExpiry)
}

// swOptions are the options the cases vary their Stores by.
var swOptions = []etagstore.Options{{}, {CacheSize: -1}, {DisableGroupCommit: true}}

// swClock is a clock the case sets. Its Sleep (retry delays, waits for
// a turn) returns at once.
type swClock struct{ ns atomic.Int64 }

func newSwClock(at time.Time) *swClock {
	c := &swClock{}
	c.Set(at)
	return c
}

func (c *swClock) Set(at time.Time) { c.ns.Store(at.UnixNano()) }
func (c *swClock) Now() time.Time   { return time.Unix(0, c.ns.Load()).UTC() }
func (c *swClock) Sleep(ctx context.Context, d time.Duration) error {
	runtime.Gosched()
	return ctx.Err()
}

// swHook is a backend whose writes, deletes and commits call before (it
// may block: a gate) and after, when set; the next one fails with fail,
// unsent, when that is set.
type swHook struct {
	driver.Backend
	before atomic.Pointer[func(ctx context.Context, acts []driver.Action)]
	after  atomic.Pointer[func(acts []driver.Action, err error)]
	fail   atomic.Pointer[error]
}

func (h *swHook) onBefore(f func(ctx context.Context, acts []driver.Action)) { h.before.Store(&f) }
func (h *swHook) onAfter(f func(acts []driver.Action, err error))            { h.after.Store(&f) }

func (h *swHook) send(ctx context.Context, acts []driver.Action, do func() error) error {
	if f := h.before.Load(); f != nil {
		(*f)(ctx, acts)
	}
	var err error
	if e := h.fail.Swap(nil); e != nil {
		err = *e
	} else {
		err = do()
	}
	if f := h.after.Load(); f != nil {
		(*f)(acts, err)
	}
	return err
}

func (h *swHook) Write(ctx context.Context, key string, w driver.Write) (etag driver.ETag, err error) {
	err = h.send(ctx, []driver.Action{{Key: key, Write: w}}, func() error {
		etag, err = h.Backend.Write(ctx, key, w)
		return err
	})
	return etag, err
}

func (h *swHook) Delete(ctx context.Context, key string, etag driver.ETag) error {
	return h.send(ctx, []driver.Action{{Key: key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etag)}}}, func() error {
		return h.Backend.Delete(ctx, key, etag)
	})
}

func (h *swHook) Abilities() driver.Abilities {
	a := h.Backend.Abilities()
	if commit := a.Commit; commit != nil {
		a.Commit = func(ctx context.Context, acts []driver.Action) (etags []driver.ETag, err error) {
			err = h.send(ctx, acts, func() error {
				etags, err = commit(ctx, acts)
				return err
			})
			return etags, err
		}
	}
	return a
}

// deletes reports whether acts delete key.
func deletes(acts []driver.Action, key string) bool {
	return slices.ContainsFunc(acts, func(a driver.Action) bool { return a.Delete && a.Key == key })
}

// touches reports whether acts write or delete key.
func touches(acts []driver.Action, key string) bool {
	return slices.ContainsFunc(acts, func(a driver.Action) bool { return a.Key == key && !a.Check })
}

// swGateTime bounds a wait at a gate: a gate not reached by then is a
// sweeper or a writer that never sent what the case steers it by (a
// failure, not a slow machine).
const swGateTime = 30 * time.Second

// swWait waits for ch, or reports that it never came.
func swWait(ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case <-time.After(swGateTime):
		return fmt.Errorf("%s: not within %v", what, swGateTime)
	}
}

// swKey is the key of card in board: "board/card" where b takes it (a
// table without Options.Partition: board is the partition), else
// "board-card".
func swKey(b driver.Backend, board, card string) string {
	if k := board + "/" + card; b.ValidateKey(k) == nil {
		return k
	}
	return board + "-" + card
}

// swScopes is the distinct entry scopes of keys (nil where b keeps no
// entries).
func swScopes(b driver.Backend, keys ...string) ([]string, error) {
	e := b.Abilities().Entries
	if e == nil {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, k := range keys {
		s, err := e.Scope(k)
		if err != nil {
			return nil, fmt.Errorf("Scope(%q): %v", k, err)
		}
		seen[s] = true
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// swState reads b's documents as stored (by a Store without indexes,
// so expired ones too) and checks its entries in scopes against them:
// every document holds exactly its entries (unique name, looked-up
// owner, expiry stamp), and no entry lacks its document. It returns the
// documents and every difference.
func swState(ctx context.Context, b driver.Backend, scopes []string) (map[string]sweepDoc, []string, error) {
	return swStateOf(ctx, swRaw(b), scopes)
}

// swRaw is a Store without indexes over b: it reads expired documents
// as stored.
func swRaw(b driver.Backend) *etagstore.Store[sweepDoc] {
	return etagstore.New[sweepDoc](b, &etagstore.Options{CacheSize: -1})
}

// swStateOf is swState through raw, a Store of swRaw.
func swStateOf(ctx context.Context, raw *etagstore.Store[sweepDoc], scopes []string) (map[string]sweepDoc, []string, error) {
	b := raw.Backend()
	docs := map[string]sweepDoc{}
	for d, err := range raw.List(ctx, "") {
		if err != nil {
			return nil, nil, fmt.Errorf("listing the documents: %w", err)
		}
		docs[d.Key] = d.Value
	}
	if b.Abilities().Entries == nil {
		return docs, nil, nil
	}
	type triple struct{ index, value, doc string }
	want := map[triple]bool{}
	for k, d := range docs {
		want[triple{"sname", d.Name, k}] = true
		want[triple{"sowner", d.Owner, k}] = true
		if d.Until != 0 {
			want[triple{swExpiryIndex, fmt.Sprintf("%013d", d.Until), k}] = true
		}
	}
	var problems []string
	got := map[triple]string{}
	for _, scope := range scopes {
		entries, err := ListEntries(ctx, b, scope)
		if err != nil {
			return nil, nil, fmt.Errorf("listing the entries of scope %q: %w", scope, err)
		}
		for _, e := range entries {
			tr := triple{e.Index, e.Value, e.Doc}
			if strings.HasPrefix(e.Index, "x") {
				if !strings.HasPrefix(e.Index, swExpiryIndex) {
					problems = append(problems, fmt.Sprintf("expiry entry %+q of index %q, not sweepDoc's", e.Key, e.Index))
				}
				tr.index = swExpiryIndex
			}
			if k, ok := got[tr]; ok {
				problems = append(problems, fmt.Sprintf("entry %+v stored twice: %+q and %+q", tr, k, e.Key))
			}
			got[tr] = e.Key
			if !want[tr] {
				problems = append(problems, fmt.Sprintf("orphan: entry %+q (%s %q → %q) has no document holding it", e.Key, e.Index, e.Value, e.Doc))
			}
		}
	}
	for tr := range want {
		if _, ok := got[tr]; !ok {
			problems = append(problems, fmt.Sprintf("missing: document %q holds %s %q without its entry", tr.doc, tr.index, tr.value))
		}
	}
	sort.Strings(problems)
	return docs, problems, nil
}

// swTally counts outcomes by name.
type swTally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *swTally) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *swTally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for k, v := range c.n {
		lines = append(lines, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, " ")
}

// swOutcome names an error's class for a tally.
func swOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, etagstore.ErrNotFound):
		return "notfound"
	}
	return "other"
}

// swParallel runs fn(i) for i below n, workers at a time, and returns the
// first error.
func swParallel(n, workers int, fn func(i int) error) error {
	jobs := make(chan int)
	var first error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := fn(i); err != nil {
					failed.Store(true)
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		if failed.Load() {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return first
}

// The refresh races' kinds of refresh: through a Store whose clock is
// behind (it reads the document as live: a client whose clock is late by
// more than the skew, or a refresh sent an instant before the expiry),
// an Update or a Replace of the version read; through a Store whose
// clock agrees with the sweeper's (it reads the document as expired), an
// Upsert, a Create, or an Update with CreateIfMissing, each of which
// writes over the expired version (If-Match) or creates the key again.
// Two more writes race the sweep through the Store whose clock is
// behind: an Update that keeps the expiry (touch: the document stays
// expired, and the next sweep deletes it), and a Delete of the version
// read.
var swKinds = []string{"update", "replace", "upsert", "create", "update-create", "touch", "delete"}

// The refresh races' orders: both started at once; the sweeper's delete
// held until the refresh has returned (the sweeper read the document
// before the refresh wrote it); the refresh's first write held until
// the sweep has returned.
var swModes = []string{"free", "sweep-read-first", "refresh-write-held"}

// Races races a refresh of an expired document against a sweep, Pairs
// times, each pair over a backend of its own holding three documents:
// R, expired and refreshed; E, expired; L, which never expires. A
// refresh through a Store whose clock is behind (Update, Replace) either
// commits, and R survives with its refreshed value, or fails with
// ErrNotFound because the sweep deleted R first; one through a Store
// that reads R as expired (Upsert, Create, Update with CreateIfMissing)
// always commits, over R or over its absence. A touch (an Update that
// keeps the expiry) that commits leaves R expired: the sweep deletes it
// if it read it after the touch, and the next sweep does otherwise. A
// Delete of the version read either commits or fails with ErrNotFound
// because the sweep deleted R first. The sweep's count is exactly what
// it deleted (E, and R when it won), and a second sweep finds nothing
// due but a touched R; a last sweep, past the refreshed expiry, deletes
// R if it survived and nothing else. After each step every document
// holds exactly its entries.
func (r SweepRig) Races(t *testing.T) {
	pairs, workers := r.Pairs, r.Workers
	if pairs == 0 {
		pairs = 10_000
	}
	if workers == 0 {
		workers = 8
	}
	newPair := r.Pair
	if newPair == nil {
		newPair = func(t *testing.T, _ int) driver.Backend { return r.New(t) }
	}
	tally := &swTally{}
	var failedPairs, backends atomic.Int32
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var env *swPairEnv
			ran := 0
			for i := range jobs {
				// A fresh backend: the first, after a failed pair, and every
				// swEnvPairs pairs (a backend may keep a record of every key
				// deleted: tombstones).
				if env == nil || ran == swEnvPairs {
					env, ran = newSwPairEnv(newPair(t, int(backends.Add(1)-1))), 0
				}
				ran++
				problems := env.race(t, i, tally)
				if len(problems) > 0 {
					env = nil
					if failedPairs.Add(1) <= 10 {
						t.Errorf("pair %d (%s, %s, options %d):\n\t%s", i, swKinds[i%len(swKinds)], swModes[i/len(swKinds)%len(swModes)],
							i/(len(swKinds)*len(swModes))%len(swOptions), strings.Join(problems, "\n\t"))
					}
				}
			}
		})
	}
	for i := range pairs {
		if failedPairs.Load() > 10 {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if n := failedPairs.Load(); n > 0 {
		t.Errorf("%d of %d pairs failed (the first 10 shown)", n, pairs)
	}
	t.Logf("%d pairs over %d backends: %v", pairs, backends.Load(), tally)
}

// swEnvPairs is how many pairs run over one backend.
const swEnvPairs = 100

// swPairEnv is a worker's backend of the refresh races and its Stores,
// which run its pairs one after another: a pair leaves the backend
// empty. The refreshers' Stores go through hr, the sweeper's through hs.
type swPairEnv struct {
	b             driver.Backend
	hr, hs        *swHook
	behind, ahead []*etagstore.Store[sweepDoc] // by swOptions
	sweeper       *etagstore.Store[sweepDoc]
	sweepClock    *swClock
	raw           *etagstore.Store[sweepDoc] // swRaw
}

func newSwPairEnv(b driver.Backend) *swPairEnv {
	e := &swPairEnv{b: b, hr: &swHook{Backend: b}, hs: &swHook{Backend: b}, sweepClock: newSwClock(swSweepAt)}
	for _, o := range swOptions {
		o.Clock = newSwClock(swT0)
		e.behind = append(e.behind, swStore(e.hr, o))
		o.Clock = newSwClock(swSweepAt)
		e.ahead = append(e.ahead, swStore(e.hr, o))
	}
	e.sweeper = swStore(e.hs, etagstore.Options{Clock: e.sweepClock})
	e.raw = swRaw(b)
	return e
}

// race runs pair i over e's backend and returns what went wrong.
func (e *swPairEnv) race(t *testing.T, i int, tally *swTally) (problems []string) {
	ctx := t.Context()
	kind, mode := i%len(swKinds), i/len(swKinds)%len(swModes)
	opt := i / (len(swKinds) * len(swModes)) % len(swOptions)
	var mu sync.Mutex // fail is called from the gates too
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	b, hr, hs, sweeper, sweepClock := e.b, e.hr, e.hs, e.sweeper, e.sweepClock
	behind, ahead := e.behind[opt], e.ahead[opt]
	sweepClock.Set(swSweepAt)
	hr.onBefore(func(context.Context, []driver.Action) {})
	hs.onBefore(func(context.Context, []driver.Action) {})
	hs.onAfter(func([]driver.Action, error) {})

	pair := fmt.Sprintf("%05d", i)
	keyR, keyE, keyL := swKey(b, "a", "r"+pair), swKey(b, "a", "e"+pair), swKey(b, "a", "l"+pair)
	scopes, err := swScopes(b, keyR, keyE, keyL)
	if err != nil {
		fail("%v", err)
		return
	}
	eAt := swExpires.Add(-30 * time.Second) // E before R in time order, or after
	if i%2 == 1 {
		eAt = swExpires.Add(30 * time.Second)
	}
	rv := sweepDoc{Name: "n-r", Owner: "o1", Until: swExpires.UnixMilli()}
	ev := sweepDoc{Name: "n-e", Owner: "o1", Until: eAt.UnixMilli()}
	lv := sweepDoc{Name: "n-l", Owner: "o2"}
	fresh := sweepDoc{Name: "n-r2", Owner: "o3", Until: swLater.UnixMilli(), N: 1}
	for k, v := range map[string]sweepDoc{keyR: rv, keyE: ev, keyL: lv} {
		if _, err := behind.Create(ctx, k, v); err != nil {
			fail("Create(%q): %v", k, err)
			return
		}
	}
	read, err := behind.Get(ctx, keyR) // Replace's version
	if err != nil {
		fail("Get(%q) by a clock before its expiry: %v", keyR, err)
		return
	}
	refresh := func() error {
		var err error
		switch kind {
		case 0:
			_, err = behind.Update(ctx, keyR, func(v *sweepDoc) error { *v = fresh; return nil })
		case 1:
			d := read
			d.Value = fresh
			_, err = behind.Replace(ctx, d)
		case 2:
			_, err = ahead.Upsert(ctx, keyR, fresh)
		case 3:
			_, err = ahead.Create(ctx, keyR, fresh)
		case 4:
			_, err = ahead.Update(ctx, keyR, func(v *sweepDoc) error { *v = fresh; return nil }, etagstore.CreateIfMissing())
		case 5:
			_, err = behind.Update(ctx, keyR, func(v *sweepDoc) error { v.N++; return nil })
		case 6:
			err = behind.Delete(ctx, keyR, read.ETag)
		}
		return err
	}
	recreates := kind >= 2 && kind <= 4 // the refresher read R as expired: it writes over it or creates it again
	touched, wantR := kind == 5, fresh  // R's value when the refresh committed
	if touched {
		wantR = rv
		wantR.N++
	}

	var deleted sync.Map // doc key → *atomic.Int32: the sweeper's deletes that committed
	counter := func(k string) *atomic.Int32 {
		c, _ := deleted.LoadOrStore(k, new(atomic.Int32))
		return c.(*atomic.Int32)
	}
	hs.onAfter(func(acts []driver.Action, err error) {
		if err != nil {
			return
		}
		for _, a := range acts {
			if a.Delete && (a.Key == keyR || a.Key == keyE || a.Key == keyL) {
				counter(a.Key).Add(1)
			}
		}
	})

	var n int
	var sweepErr, refreshErr error
	var wg sync.WaitGroup
	switch mode {
	case 0: // free
		start := make(chan struct{})
		wg.Go(func() { <-start; n, sweepErr = sweeper.Sweep(ctx) })
		wg.Go(func() { <-start; refreshErr = refresh() })
		close(start)
	case 1: // the sweeper's delete of R waits for the refresh
		atGate, refreshed := make(chan struct{}), make(chan struct{})
		var once sync.Once
		hs.onBefore(func(_ context.Context, acts []driver.Action) {
			if deletes(acts, keyR) {
				once.Do(func() {
					close(atGate)
					if err := swWait(refreshed, "the refresh's return"); err != nil {
						fail("%v", err)
					}
				})
			}
		})
		wg.Go(func() { n, sweepErr = sweeper.Sweep(ctx) })
		wg.Go(func() {
			defer close(refreshed)
			if err := swWait(atGate, "the sweeper's delete of R"); err != nil {
				fail("%v", err)
			}
			refreshErr = refresh()
		})
	case 2: // the refresh's first write of R waits for the sweep
		swept := make(chan struct{})
		var once sync.Once
		hr.onBefore(func(_ context.Context, acts []driver.Action) {
			if touches(acts, keyR) {
				once.Do(func() {
					if err := swWait(swept, "the sweep's return"); err != nil {
						fail("%v", err)
					}
				})
			}
		})
		wg.Go(func() { defer close(swept); n, sweepErr = sweeper.Sweep(ctx) })
		wg.Go(func() { refreshErr = refresh() })
	}
	wg.Wait()
	hs.onBefore(func(context.Context, []driver.Action) {})
	hr.onBefore(func(context.Context, []driver.Action) {})
	sweptR, sweptE, sweptL := int(counter(keyR).Load()), int(counter(keyE).Load()), int(counter(keyL).Load())
	won := "R-kept"
	if sweptR > 0 {
		won = "R-swept"
	}
	tally.add(fmt.Sprintf("%s/%s/%s/%s", swKinds[kind], swModes[mode], won, swOutcome(refreshErr)))
	if sweepErr != nil {
		fail("Sweep: %v", sweepErr)
	}
	switch {
	case recreates && refreshErr != nil:
		fail("%s of an expired R: %v; want it to write over R or create it again", swKinds[kind], refreshErr)
	case !recreates && refreshErr != nil && !errors.Is(refreshErr, etagstore.ErrNotFound):
		fail("%s of R: %v; want nil, or ErrNotFound after the sweep deleted it", swKinds[kind], refreshErr)
	case touched && refreshErr != nil && sweptR == 0:
		fail("touch of R returned %v, yet the sweep did not delete R", refreshErr)
	case !recreates && !touched && (refreshErr == nil) == (sweptR > 0): // the refresh read R as live
		fail("%s of R returned %v and the sweep deleted R %d times: exactly one of them must win", swKinds[kind], refreshErr, sweptR)
	}
	if sweptR > 1 || sweptE != 1 || sweptL != 0 {
		fail("the sweep deleted R %d times, E %d, L %d; want R at most once, E once, L never", sweptR, sweptE, sweptL)
	}
	if n != sweptR+sweptE {
		fail("Sweep = %d, but it deleted %d documents", n, sweptR+sweptE)
	}
	switch mode {
	case 1:
		if sweptR != 0 || refreshErr != nil {
			fail("the sweeper read R before the refresh wrote it: the refresh must win (got %v) and the sweep leave R (deleted %d)", refreshErr, sweptR)
		}
	case 2:
		if sweptR != 1 {
			fail("the sweep ran while the refresh was held: it must delete R (deleted %d)", sweptR)
		}
	}
	// A touched R stays expired: a sweep that read it after the touch
	// deletes it.
	survives := recreates || refreshErr == nil && kind != 6 && !(touched && sweptR > 0)
	check := func(when string, want map[string]sweepDoc) {
		docs, ps, err := swStateOf(ctx, e.raw, scopes)
		if err != nil {
			fail("%s: %v", when, err)
			return
		}
		for _, p := range ps {
			fail("%s: %s", when, p)
		}
		for k, v := range want {
			if got, ok := docs[k]; !ok || got != v {
				fail("%s: %q = %+v (stored %v), want %+v", when, k, got, ok, v)
			}
		}
		for k, v := range docs {
			if _, ok := want[k]; !ok {
				fail("%s: %q = %+v is stored, want it gone", when, k, v)
			}
		}
	}
	want := map[string]sweepDoc{keyL: lv}
	if survives {
		want[keyR] = wantR
	}
	check("after the race", want)
	// No expired version survives a completed sweep: another finds nothing
	// due but a touched R, which is still expired.
	wantN := 0
	if survives && touched {
		wantN = 1
		delete(want, keyR)
	}
	if n, err := sweeper.Sweep(ctx); n != wantN || err != nil {
		fail("a second Sweep = %d, %v; want %d, nil", n, err, wantN)
	}
	check("after a second sweep", want)
	sweepClock.Set(swLast)
	wantN = 0
	if survives && !touched {
		wantN = 1
	}
	if n, err := sweeper.Sweep(ctx); n != wantN || err != nil {
		fail("the last Sweep, past the refreshed expiry, = %d, %v; want %d, nil", n, err, wantN)
	}
	check("after the last sweep", map[string]sweepDoc{keyL: lv})
	// The pair leaves the backend empty for the next one.
	if err := behind.Delete(ctx, keyL, etagstore.ETagAny); err != nil {
		fail("Delete(%q): %v", keyL, err)
	}
	check("after L's delete", nil)
	return problems
}

// swClasses are the documents of the sweepers' and the faults' cases, by
// i%5: 0 never expires, 1 expires later, 2 has expired and is refreshed
// (by a Store whose clock is behind) while the sweepers run, 3 and 4
// have expired.
const (
	swLive = iota
	swFuture
	swRefreshed
)

// swPopulate creates docs documents over b (through a Store whose clock
// is at swT0), on boards a and b, and returns their keys, values and
// entry scopes.
func swPopulate(t *testing.T, b driver.Backend, docs int) ([]string, []sweepDoc, []string) {
	t.Helper()
	ctx := t.Context()
	s := swStore(b, etagstore.Options{Clock: newSwClock(swT0)})
	keys, vals := make([]string, docs), make([]sweepDoc, docs)
	for i := range docs {
		keys[i] = swKey(b, string(rune('a'+i%2)), fmt.Sprintf("d%05d", i))
		v := sweepDoc{Name: fmt.Sprintf("n%05d", i), Owner: fmt.Sprintf("o%d", i%3)}
		switch i % 5 {
		case swLive:
		case swFuture:
			v.Until = swLater.UnixMilli()
		default: // expired by swSweepAt, at instants spread over the minute before
			v.Until = swExpires.Add(-time.Duration(i%60) * time.Second).UnixMilli()
		}
		vals[i] = v
	}
	if err := swParallel(docs, 16, func(i int) error {
		_, err := s.Create(ctx, keys[i], vals[i])
		return err
	}); err != nil {
		t.Fatalf("creating the documents: %v", err)
	}
	scopes, err := swScopes(b, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return keys, vals, scopes
}

// swWaves starts the refreshes of the sweepers' and the faults' cases in
// three waves, by the document's index: with the sweepers, when the
// sweepers send their first request, and when they have deleted half
// the documents due; so that refreshes meet sweeps before, during and
// after their reads. sent and deleted are called by the sweepers' hooks.
type swWaves struct {
	start, first, half  chan struct{}
	firstOnce, halfOnce sync.Once
	deletes             atomic.Int32
	due                 int32
}

func newSwWaves(due int) *swWaves {
	return &swWaves{start: make(chan struct{}), first: make(chan struct{}), half: make(chan struct{}), due: int32(due)}
}

func (w *swWaves) sent() { w.firstOnce.Do(func() { close(w.first) }) }
func (w *swWaves) deleted() {
	if w.deletes.Add(1) >= w.due/2 {
		w.halfOnce.Do(func() { close(w.half) })
	}
}

// wait waits for the wave of the i-th refresh. A wave that never comes
// (the sweepers ended first) lets it go when done is closed.
func (w *swWaves) wait(i int, done <-chan struct{}) {
	<-w.start
	switch i % 3 {
	case 1:
		select {
		case <-w.first:
		case <-done:
		}
	case 2:
		select {
		case <-w.half:
		case <-done:
		}
	}
}

// swDue is how many of docs documents (swClasses) are due.
func swDue(docs int) int {
	due := 0
	for i := range docs {
		if i%5 >= swRefreshed {
			due++
		}
	}
	return due
}

// swRefresh is the refresh of a document of class swRefreshed: its
// expiry an hour on, through a Store whose clock is behind.
func swRefresh(ctx context.Context, s *etagstore.Store[sweepDoc], key string) (sweepDoc, error) {
	d, err := s.Update(ctx, key, func(v *sweepDoc) error { v.Until, v.N = swLater.UnixMilli(), v.N+1; return nil })
	return d.Value, err
}

// swWantState checks the documents and entries of b after the sweepers:
// those that never expired or expire later, unchanged; the refreshed
// ones whose refresh committed, refreshed; no other.
func swWantState(t *testing.T, b driver.Backend, scopes, keys []string, vals []sweepDoc, refreshed map[string]sweepDoc) {
	t.Helper()
	docs, problems, err := swState(t.Context(), b, scopes)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	want := map[string]sweepDoc{}
	for i, k := range keys {
		switch i % 5 {
		case swLive, swFuture:
			want[k] = vals[i]
		case swRefreshed:
			if v, ok := refreshed[k]; ok {
				want[k] = v
			}
		}
	}
	bad := 0
	for k, v := range want {
		if got, ok := docs[k]; (!ok || got != v) && bad < 10 {
			bad++
			t.Errorf("%q = %+v (stored %v), want %+v", k, got, ok, v)
		}
	}
	for k, v := range docs {
		if _, ok := want[k]; !ok && bad < 10 {
			bad++
			t.Errorf("%q = %+v is stored, want it swept", k, v)
		}
	}
	if len(docs) != len(want) {
		t.Errorf("%d documents stored, want %d", len(docs), len(want))
	}
}

// Sweepers runs k sweepers at once, each a Store of its own with one
// Sweep, over Docs documents (swClasses), while each expired document of
// class swRefreshed is refreshed (in three waves: swWaves). Every sweeper lists and reads before
// any of them sends a request (a gate at their first), so that all of
// them meet the same expired documents. Each document is deleted at
// most once, the sweepers' counts add up to the documents deleted,
// which are exactly the expired ones not refreshed (a refresh that found
// its document deleted fails with ErrNotFound), and another sweep finds
// nothing due.
func (r SweepRig) Sweepers(t *testing.T, k int) {
	ctx := t.Context()
	docs := r.Docs
	if docs == 0 {
		docs = 400
	}
	b := r.New(t)
	keys, vals, scopes := swPopulate(t, b, docs)
	var mu sync.Mutex
	deleted := map[string]int{}
	isDoc := map[string]bool{}
	for _, key := range keys {
		isDoc[key] = true
	}
	first := make(chan struct{}) // closed when every sweeper has come to its first request
	var arrived atomic.Int32
	waves := newSwWaves(swDue(docs))
	sweepers := make([]*etagstore.Store[sweepDoc], k)
	for j := range sweepers {
		h := &swHook{Backend: b}
		var once sync.Once
		h.onBefore(func(context.Context, []driver.Action) {
			once.Do(func() {
				if arrived.Add(1) == int32(k) {
					close(first)
					waves.sent()
				}
				if err := swWait(first, "every sweeper's first request"); err != nil {
					t.Error(err)
				}
			})
		})
		h.onAfter(func(acts []driver.Action, err error) {
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, a := range acts {
				if a.Delete && isDoc[a.Key] {
					deleted[a.Key]++
					waves.deleted()
				}
			}
		})
		o := swOptions[j%len(swOptions)]
		o.Clock = newSwClock(swSweepAt)
		sweepers[j] = swStore(h, o)
	}
	refresher := swStore(b, etagstore.Options{Clock: newSwClock(swT0)})

	ns, errs := make([]int, k), make([]error, k)
	var refreshMu sync.Mutex
	refreshed := map[string]sweepDoc{}
	refreshTally := &swTally{}
	var wg, swept sync.WaitGroup
	done := make(chan struct{})
	for j, s := range sweepers {
		swept.Go(func() { <-waves.start; ns[j], errs[j] = s.Sweep(ctx) })
	}
	go func() { swept.Wait(); close(done) }()
	for i, key := range keys {
		if i%5 != swRefreshed {
			continue
		}
		wg.Go(func() {
			waves.wait(i/5, done)
			v, err := swRefresh(ctx, refresher, key)
			refreshTally.add(fmt.Sprintf("wave%d-%s", i/5%3, swOutcome(err)))
			switch {
			case err == nil:
				refreshMu.Lock()
				refreshed[key] = v
				refreshMu.Unlock()
			case !errors.Is(err, etagstore.ErrNotFound):
				t.Errorf("refresh of %q: %v; want nil, or ErrNotFound after a sweeper deleted it", key, err)
			}
		})
	}
	close(waves.start)
	wg.Wait()
	<-done
	t.Logf("sweepers' counts %v; refreshes: %v", ns, refreshTally)

	total, expired := 0, 0
	for j := range k {
		if errs[j] != nil {
			t.Errorf("sweeper %d: Sweep = %d, %v", j, ns[j], errs[j])
		}
		total += ns[j]
	}
	for i, key := range keys {
		switch i % 5 {
		case swLive, swFuture:
		case swRefreshed:
			if _, ok := refreshed[key]; !ok {
				expired++
			}
		default:
			expired++
		}
	}
	twice := 0
	deletes := 0
	for key, c := range deleted {
		deletes += c
		if c > 1 && twice < 10 {
			twice++
			t.Errorf("%q deleted %d times", key, c)
		}
	}
	if total != expired || deletes != expired {
		t.Errorf("the sweepers' counts add up to %d and they deleted %d times; want %d, the expired documents not refreshed", total, deletes, expired)
	}
	if n, err := swStore(b, etagstore.Options{Clock: newSwClock(swSweepAt)}).Sweep(ctx); n != 0 || err != nil {
		t.Errorf("a sweep after the sweepers = %d, %v; want 0, nil", n, err)
	}
	swWantState(t, b, scopes, keys, vals, refreshed)
}

// swFaultPasses bounds the passes of each sweeper of the fault case.
const swFaultPasses = 200

// Faults sweeps through faults (10% of the answers lost after the
// request was applied, 5% answered 503; reads too): two sweepers, each a
// Store of its own, sweep again until a pass returns 0 without an
// error, while each document of class swRefreshed is refreshed past the
// faults, in three waves (swWaves). A pass may fail; at the end, read
// past the faults, exactly the expired documents not refreshed are gone,
// every refreshed one holds its refresh, the entries match the
// documents, and a sweep finds nothing due. The passes' counts never add up to more than the
// documents deleted, nor to less than that less the passes that failed
// on a request that may have been applied.
func (r SweepRig) Faults(t *testing.T) {
	ctx := t.Context()
	docs := r.Docs
	if docs == 0 {
		docs = 400
	}
	faulty, direct, counts := r.Faulty(t, Faults{Seed: 45, DropAfterCommit: 0.10, Unavailable: 0.05, Reads: true})
	keys, vals, scopes := swPopulate(t, direct, docs)
	refresher := swStore(direct, etagstore.Options{Clock: newSwClock(swT0)})

	type pass struct {
		n   int
		err error
	}
	passes := make([][]pass, 2)
	var mu sync.Mutex
	refreshed := map[string]sweepDoc{}
	refreshTally := &swTally{}
	waves := newSwWaves(swDue(docs))
	var wg, swept sync.WaitGroup
	done := make(chan struct{})
	for j := range passes {
		o := swOptions[j]
		o.Clock = newSwClock(swSweepAt)
		h := &swHook{Backend: faulty}
		h.onBefore(func(context.Context, []driver.Action) { waves.sent() })
		h.onAfter(func(acts []driver.Action, err error) {
			if err == nil && slices.ContainsFunc(acts, func(a driver.Action) bool { return a.Delete }) {
				waves.deleted()
			}
		})
		s := swStore(h, o)
		swept.Go(func() {
			<-waves.start
			for range swFaultPasses {
				n, err := s.Sweep(ctx)
				passes[j] = append(passes[j], pass{n, err})
				if n == 0 && err == nil || ctx.Err() != nil {
					return
				}
			}
		})
	}
	go func() { swept.Wait(); close(done) }()
	for i, key := range keys {
		if i%5 != swRefreshed {
			continue
		}
		wg.Go(func() {
			waves.wait(i/5, done)
			v, err := swRefresh(ctx, refresher, key)
			refreshTally.add(fmt.Sprintf("wave%d-%s", i/5%3, swOutcome(err)))
			switch {
			case err == nil:
				mu.Lock()
				refreshed[key] = v
				mu.Unlock()
			case !errors.Is(err, etagstore.ErrNotFound):
				t.Errorf("refresh of %q: %v; want nil, or ErrNotFound after a sweeper deleted it", key, err)
			}
		})
	}
	close(waves.start)
	wg.Wait()
	<-done
	t.Logf("faults: %v; refreshes: %v", counts(), refreshTally)

	total, failed, applied := 0, 0, 0
	errTally := &swTally{}
	for j, ps := range passes {
		var line []string
		for _, p := range ps {
			total += p.n
			if p.err != nil {
				failed++
				if !errors.Is(p.err, driver.ErrNotApplied) {
					applied++ // its failed request may have deleted a document
				}
				errTally.add(errClass(p.err))
				if failed <= 3 {
					t.Logf("a failed pass: %v", p.err)
				}
				line = append(line, fmt.Sprintf("%d!", p.n))
			} else {
				line = append(line, fmt.Sprint(p.n))
			}
		}
		t.Logf("sweeper %d: %d passes: %s", j, len(ps), strings.Join(line, " "))
		if last := ps[len(ps)-1]; last.n != 0 || last.err != nil {
			t.Errorf("sweeper %d: still sweeping after %d passes: the last = %d, %v", j, len(ps), last.n, last.err)
		}
	}
	t.Logf("failed passes: %d (%v), %d of them on a request that may have been applied", failed, errTally, applied)
	expired := 0
	for i, key := range keys {
		if i%5 == swRefreshed {
			if _, ok := refreshed[key]; !ok {
				expired++
			}
		} else if i%5 != swLive && i%5 != swFuture {
			expired++
		}
	}
	t.Logf("%d of %d refreshed; %d expired and not refreshed; the passes counted %d", len(refreshed), docs/5, expired, total)
	swWantState(t, direct, scopes, keys, vals, refreshed)
	if n, err := swStore(direct, etagstore.Options{Clock: newSwClock(swSweepAt)}).Sweep(ctx); n != 0 || err != nil {
		t.Errorf("a sweep past the faults = %d, %v; want 0, nil", n, err)
	}
	// A pass stops at its first failed request: no more start, those
	// running (index.DocsAtOnce at most) finish. The documents that
	// failed requests deleted, if they did (not when the service refused
	// them: ErrNotApplied), are the only ones the pass leaves out of its
	// count: at most one per request running.
	if total > expired {
		t.Errorf("the passes counted %d documents swept; only %d were deleted (one counted twice)", total, expired)
	}
	if total < expired-applied*index.DocsAtOnce {
		t.Errorf("the passes counted %d documents swept, %d failed on a request that may have been applied; %d were deleted: a pass left out of its count more than the documents of the requests it had running", total, applied, expired)
	}
}

// swTicker is the clock of the SweepEvery case: Now is set by Advance,
// and a Sleep of the period waits for the next Advance (other sleeps,
// retry delays, return at once). Each sleeper of the period signals
// sleeping as it starts.
type swTicker struct {
	period   time.Duration
	ns       atomic.Int64
	mu       sync.Mutex
	tick     chan struct{} // closed by the next Advance
	sleeping chan struct{}
}

func newSwTicker(at time.Time, period time.Duration) *swTicker {
	c := &swTicker{period: period, tick: make(chan struct{}), sleeping: make(chan struct{}, 64)}
	c.ns.Store(at.UnixNano())
	return c
}

func (c *swTicker) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

func (c *swTicker) Sleep(ctx context.Context, d time.Duration) error {
	if d != c.period || ctx.Err() != nil {
		return ctx.Err()
	}
	c.mu.Lock()
	tick := c.tick
	c.mu.Unlock()
	c.sleeping <- struct{}{}
	select {
	case <-tick:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Advance moves Now a period on and wakes every sleeper.
func (c *swTicker) Advance() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ns.Add(int64(c.period))
	close(c.tick)
	c.tick = make(chan struct{})
}

// asleep waits until n more sleepers sleep.
func (c *swTicker) asleep(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := swWait(c.sleeping, "a SweepEvery's sleep"); err != nil {
			t.Fatal(err)
		}
	}
}

// swPasses counts a Store's sweep passes from its log lines
// ("etagstore: sweep pass") and the documents they swept.
type swPasses struct {
	passes, failed, swept, lockWarnings atomic.Int64
	mu                                  sync.Mutex
	lines                               []string // every line, for a failure's message
}

func (p *swPasses) Enabled(context.Context, slog.Level) bool { return true }
func (p *swPasses) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *swPasses) WithGroup(string) slog.Handler            { return p }
func (p *swPasses) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	p.mu.Lock()
	p.lines = append(p.lines, line)
	p.mu.Unlock()
	switch r.Message {
	case "etagstore: sweep pass":
		p.passes.Add(1)
	case "etagstore: sweep pass failed":
		p.failed.Add(1)
	case "etagstore: background lock":
		p.lockWarnings.Add(1)
		return nil
	default:
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "swept" {
			p.swept.Add(a.Value.Int64())
		}
		return true
	})
	return nil
}

func (p *swPasses) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d passes (%d failed), %d swept [%s]", p.passes.Load(), p.failed.Load(), p.swept.Load(), strings.Join(p.lines, "; "))
}

// swLocks is the harness's Locker: locks in memory, which the case
// can take away from their holder (Revoke), as a lease runs out.
type swLocks struct {
	mu      sync.Mutex
	held    map[string]*swHeld
	holds   int
	unlocks int
}

type swHeld struct {
	l      *swLocks
	name   string
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *swLocks) TryHold(ctx context.Context, name string) (etagstore.Held, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]*swHeld{}
	}
	if _, ok := l.held[name]; ok {
		return nil, fmt.Errorf("%w: %q is held", etagstore.ErrLocked, name)
	}
	h := &swHeld{l: l, name: name}
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.held[name] = h
	l.holds++
	return h, nil
}

func (h *swHeld) Context() context.Context { return h.ctx }

func (h *swHeld) Unlock(context.Context) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.unlocks++
	if h.l.held[h.name] == h {
		delete(h.l.held, h.name)
	}
	h.cancel()
	return nil
}

// Revoke takes every lock from its holder.
func (l *swLocks) Revoke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, h := range l.held {
		h.cancel()
		delete(l.held, name)
	}
}

// free reports whether no lock is held, and every hold was unlocked.
func (l *swLocks) free() (bool, int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held) == 0 && l.holds == l.unlocks, l.holds, l.unlocks
}

// swEveryPeriod is SweepEvery's period in the case: no retry delay
// equals it.
const swEveryPeriod = time.Minute

// swEvery is one SweepEvery of the case: its Store's passes, its
// context's cancel, and its result once it returned.
type swEvery struct {
	log    *swPasses
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Every runs two SweepEvery loops, each a Store of its own over one
// backend, on one fake clock whose Advance ends their sleeps: without a
// lock, with the rig's locks (one loop sweeps each period, the other
// stands by, and takes over when the first one's context is cancelled),
// with the harness's locks taken from their holder while it sleeps (the
// other one takes over at the next period) and while its pass is under
// way (LockLostMidPass); and with failures (Failures). Passes are
// counted from the Stores' log lines; a cancelled loop returns nil.
func (r SweepRig) Every(t *testing.T) {
	t.Run("NoLock", func(t *testing.T) { r.every(t, nil, nil, false) })
	t.Run("Lock", func(t *testing.T) {
		var a, b etagstore.Locker
		if r.Locks != nil {
			a, b = r.Locks(t)
		} else {
			l := &swLocks{}
			a, b = l, l
		}
		r.every(t, a, b, false)
	})
	t.Run("LockRevoked", func(t *testing.T) {
		l := &swLocks{}
		r.every(t, l, l, true)
	})
	t.Run("Failures", r.everyFailures)
	t.Run("LockLostMidPass", r.everyLockLost)
}

// everyLockLost: the lock is taken from the loop sweeping while its pass
// is under way (held at its first request): the pass ends, failed, and
// deletes nothing; the loop stands by; at the next period both try the
// lock, and the one that takes it sweeps what is left.
func (r SweepRig) everyLockLost(t *testing.T) {
	ctx := t.Context()
	b := r.New(t)
	ticker := newSwTicker(swSweepAt, swEveryPeriod)
	writer := swStore(b, etagstore.Options{Clock: newSwClock(swT0)})
	n := 0
	add := func(count int, until time.Time) {
		t.Helper()
		for range count {
			key := swKey(b, string(rune('a'+n%2)), fmt.Sprintf("m%03d", n))
			n++
			if _, err := writer.Create(ctx, key, sweepDoc{Name: "n" + key, Owner: "o", Until: until.UnixMilli()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(4, swExpires)
	lock := &swLocks{}
	loops := make([]*swEvery, 2)
	hooks := make([]*swHook, 2)
	for j := range loops {
		e := &swEvery{log: &swPasses{}, done: make(chan struct{})}
		loops[j], hooks[j] = e, &swHook{Backend: b}
		o := swOptions[j]
		o.Clock, o.Logger = ticker, slog.New(e.log)
		s := swStore(hooks[j], o)
		lctx, cancel := context.WithCancel(ctx)
		e.cancel = cancel
		go func() {
			defer close(e.done)
			e.err = s.SweepEvery(lctx, swEveryPeriod, lock)
		}()
	}
	t.Cleanup(func() {
		for _, e := range loops {
			e.cancel()
			<-e.done
		}
	})
	ticker.asleep(t, 2)
	win, lose := 0, 1
	if loops[1].log.passes.Load() > 0 {
		win, lose = 1, 0
	}
	w, l := loops[win].log, loops[lose].log
	if w.passes.Load() != 1 || w.swept.Load() != 4 || l.passes.Load()+l.failed.Load() != 0 {
		t.Fatalf("the first period: the holder %v, the other %v; want one pass sweeping 4, and none", w, l)
	}
	add(5, ticker.Now().Add(swEveryPeriod/2))
	atGate, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hooks[win].onBefore(func(ctx context.Context, _ []driver.Action) {
		once.Do(func() {
			close(atGate)
			<-release
			// The lock is lost: the pass's request must see it, as its
			// context done (the lock's loss reaches it by a goroutine of
			// its own, a moment later).
			if err := swWait(ctx.Done(), "the end of the pass's context after the lock was lost"); err != nil {
				t.Error(err)
			}
		})
	})
	ticker.Advance()
	if err := swWait(atGate, "the holder's pass's first request"); err != nil {
		t.Fatal(err)
	}
	ticker.asleep(t, 1) // the other one, refused the lock
	lock.Revoke()
	close(release)
	ticker.asleep(t, 1) // the holder that was, its pass ended
	if w.passes.Load() != 1 || w.failed.Load() != 1 || w.swept.Load() != 4 || l.passes.Load()+l.failed.Load() != 0 {
		t.Fatalf("the period the lock was lost in: the holder %v, the other %v; want its pass ended, failed, deleting nothing, and the other standing by", w, l)
	}
	ticker.Advance()
	ticker.asleep(t, 2)
	if w.passes.Load()+l.passes.Load() != 2 || w.failed.Load()+l.failed.Load() != 1 || w.swept.Load()+l.swept.Load() != 9 {
		t.Fatalf("the next period: the holder that was %v, the other %v; want one of them to sweep the 5 left", w, l)
	}
	for _, e := range loops {
		e.cancel()
		if err := swWait(e.done, "SweepEvery's return after its context was cancelled"); err != nil {
			t.Fatal(err)
		}
		if e.err != nil {
			t.Errorf("SweepEvery after its context was cancelled = %v, want nil", e.err)
		}
	}
	if free, holds, unlocks := lock.free(); !free || holds != 2 {
		t.Errorf("after both loops returned: lock free %v, %d holds, %d unlocks; want it free, taken twice", free, holds, unlocks)
	}
}

// swFlakyLock is a Locker whose next TryHold fails with err (not
// ErrLocked), when set.
type swFlakyLock struct {
	swLocks
	err atomic.Pointer[error]
}

func (l *swFlakyLock) TryHold(ctx context.Context, name string) (etagstore.Held, error) {
	if e := l.err.Swap(nil); e != nil {
		return nil, *e
	}
	return l.swLocks.TryHold(ctx, name)
}

// everyFailures: a SweepEvery whose lock fails to answer logs it and
// tries again the next period; one whose pass fails logs it, keeps the
// lock and sweeps again the next period.
func (r SweepRig) everyFailures(t *testing.T) {
	ctx := t.Context()
	b := r.New(t)
	ticker := newSwTicker(swSweepAt, swEveryPeriod)
	writer := swStore(b, etagstore.Options{Clock: newSwClock(swT0)})
	var keys []string
	for i := range 6 {
		key := swKey(b, "f", fmt.Sprintf("k%02d", i))
		keys = append(keys, key)
		if _, err := writer.Create(ctx, key, sweepDoc{Name: "n" + key, Owner: "o", Until: swExpires.UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
	lock := &swFlakyLock{}
	lockErr := errors.New("storetest: the lock service did not answer")
	lock.err.Store(&lockErr)
	h := &swHook{Backend: b}
	// Refused (not lost: a lost answer is sent again), so the pass fails.
	sendErr := fmt.Errorf("%w: storetest: the sweep's request failed", etagstore.ErrUnavailable)
	h.fail.Store(&sendErr)
	log := &swPasses{}
	s := swStore(h, etagstore.Options{Clock: ticker, Logger: slog.New(log)})
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var everyErr error
	go func() {
		defer close(done)
		everyErr = s.SweepEvery(lctx, swEveryPeriod, lock)
	}()
	defer func() { cancel(); <-done }()
	want := func(when string, warnings, failed, passes, swept int) {
		t.Helper()
		if int(log.lockWarnings.Load()) != warnings || int(log.failed.Load()) != failed || int(log.passes.Load()) != passes || int(log.swept.Load()) != swept {
			t.Fatalf("%s: %v, %d lock warnings; want %d passes (%d failed), %d swept, %d lock warnings", when, log, log.lockWarnings.Load(), passes, failed, swept, warnings)
		}
	}
	ticker.asleep(t, 1)
	want("the first period, the lock failing", 1, 0, 0, 0)
	ticker.Advance()
	ticker.asleep(t, 1)
	// The failed request deleted nothing; those running beside it
	// (index.DocsAtOnce at a time) went on, and no more started.
	if k := int(log.swept.Load()); k > 5 || k > index.DocsAtOnce-1 || log.failed.Load() != 1 || log.passes.Load() != 0 || log.lockWarnings.Load() != 1 {
		t.Fatalf("the second period, the sweep's first request failing: %v, %d lock warnings; want 0 passes (1 failed), at most %d swept, 1 lock warning", log, log.lockWarnings.Load(), min(5, index.DocsAtOnce-1))
	}
	ticker.Advance()
	ticker.asleep(t, 1)
	want("the third period", 1, 1, 1, 6)
	if _, holds, _ := lock.free(); holds != 1 {
		t.Errorf("the lock was taken %d times, want once: a failed pass keeps it", holds)
	}
	cancel()
	if err := swWait(done, "SweepEvery's return after its context was cancelled"); err != nil {
		t.Fatal(err)
	}
	if everyErr != nil {
		t.Errorf("SweepEvery after its context was cancelled = %v, want nil", everyErr)
	}
	if free, holds, unlocks := lock.free(); !free {
		t.Errorf("after SweepEvery returned the lock is still held: %d holds, %d unlocks", holds, unlocks)
	}
}

func (r SweepRig) every(t *testing.T, lockA, lockB etagstore.Locker, revoke bool) {
	ctx := t.Context()
	b := r.New(t)
	ticker := newSwTicker(swSweepAt, swEveryPeriod)
	writer := swStore(b, etagstore.Options{Clock: newSwClock(swT0)})
	var keys []string
	add := func(n int, until time.Time) {
		t.Helper()
		for range n {
			key := swKey(b, string(rune('a'+len(keys)%2)), fmt.Sprintf("e%03d", len(keys)))
			keys = append(keys, key)
			v := sweepDoc{Name: "n" + key, Owner: "o"}
			if !until.IsZero() {
				v.Until = until.UnixMilli()
			}
			if _, err := writer.Create(ctx, key, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(12, swExpires) // due at the first pass
	add(2, time.Time{})
	live := keys[12:]
	// Due by the next period (ExpirySkew: 5 s).
	dueNext := func() time.Time { return ticker.Now().Add(swEveryPeriod / 2) }

	loops := make([]*swEvery, 2)
	for j, lock := range []etagstore.Locker{lockA, lockB} {
		e := &swEvery{log: &swPasses{}, done: make(chan struct{})}
		loops[j] = e
		o := swOptions[j]
		o.Clock, o.Logger = ticker, slog.New(e.log)
		s := swStore(b, o)
		lctx, cancel := context.WithCancel(ctx)
		e.cancel = cancel
		go func() {
			defer close(e.done)
			e.err = s.SweepEvery(lctx, swEveryPeriod, lock)
		}()
	}
	t.Cleanup(func() {
		for _, e := range loops {
			e.cancel()
			<-e.done
		}
	})
	stop := func(e *swEvery) {
		t.Helper()
		e.cancel()
		if err := swWait(e.done, "SweepEvery's return after its context was cancelled"); err != nil {
			t.Fatal(err)
		}
		if e.err != nil {
			t.Errorf("SweepEvery after its context was cancelled = %v, want nil", e.err)
		}
	}
	want := func(when string, passesA, passesB, swept int) {
		t.Helper()
		a, b := loops[0].log, loops[1].log
		if int(a.passes.Load()) != passesA || int(b.passes.Load()) != passesB || int(a.swept.Load()+b.swept.Load()) != swept || a.failed.Load()+b.failed.Load() != 0 {
			t.Fatalf("%s: loop A %v, loop B %v; want %d and %d passes, none failed, %d swept in all", when, a, b, passesA, passesB, swept)
		}
	}

	ticker.asleep(t, 2)
	if lockA == nil {
		want("first period", 1, 1, 12)
		add(5, dueNext())
		ticker.Advance()
		ticker.asleep(t, 2)
		want("second period", 2, 2, 17)
		ticker.Advance()
		ticker.asleep(t, 2)
		want("third period", 3, 3, 17)
		stop(loops[0])
		stop(loops[1])
	} else {
		// One took the lock and swept; the other stands by.
		win, lose := 0, 1
		if loops[1].log.passes.Load() > 0 {
			win, lose = 1, 0
		}
		wantWL := func(when string, w, l, swept int) {
			t.Helper()
			if win == 0 {
				want(when, w, l, swept)
			} else {
				want(when, l, w, swept)
			}
		}
		wantWL("first period", 1, 0, 12)
		add(5, dueNext())
		ticker.Advance()
		ticker.asleep(t, 2)
		wantWL("second period", 2, 0, 17)
		add(3, dueNext())
		if revoke {
			// The lock is taken from the holder while it sleeps: at the
			// next period it stands by, and the other one takes it.
			lockA.(*swLocks).Revoke()
			ticker.Advance()
			ticker.asleep(t, 2)
			wantWL("the period after the lock was lost", 2, 1, 20)
			ticker.Advance()
			ticker.asleep(t, 2)
			wantWL("the next period", 2, 2, 20)
			stop(loops[win])
			stop(loops[lose])
		} else {
			// The holder stops (and unlocks): the other one takes over.
			stop(loops[win])
			ticker.Advance()
			ticker.asleep(t, 1)
			wantWL("the period after the holder stopped", 2, 1, 20)
			ticker.Advance()
			ticker.asleep(t, 1)
			wantWL("the next period", 2, 2, 20)
			stop(loops[lose])
		}
		if l, ok := lockA.(*swLocks); ok {
			if free, holds, unlocks := l.free(); !free {
				t.Errorf("after both loops returned the lock is still held: %d holds, %d unlocks", holds, unlocks)
			}
		}
	}
	scopes, err := swScopes(b, keys...)
	if err != nil {
		t.Fatal(err)
	}
	docs, problems, err := swState(ctx, b, scopes)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if got := slices.Sorted(maps.Keys(docs)); !slices.Equal(got, live) {
		t.Errorf("after the loops the documents are %q, want %q (those that never expire)", got, live)
	}
}

// BadInput: SweepEvery refuses a period under a millisecond, with or
// without a lock, and a Store without an Expiry index, as Sweep does,
// at once (ErrInvalidInput).
func (r SweepRig) BadInput(t *testing.T) {
	ctx := t.Context()
	b := r.New(t)
	// A sleep means SweepEvery took the input: it ends at once, with an
	// error SweepEvery does not return.
	o := etagstore.Options{Clock: swNoSleep{}}
	s := swStore(b, o)
	for _, lock := range []etagstore.Locker{nil, &swLocks{}} {
		for _, p := range []time.Duration{0, -time.Minute, time.Millisecond - 1, time.Nanosecond} {
			if err := s.SweepEvery(ctx, p, lock); !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("SweepEvery(period %v, lock %v) = %v, want ErrInvalidInput", p, lock != nil, err)
			}
		}
	}
	without := []*etagstore.Store[sweepDoc]{etagstore.New[sweepDoc](b, &o)}
	if b.Abilities().Entries != nil {
		without = append(without, etagstore.New[sweepDoc](b, &o, swByName, swByOwner))
	}
	for i, s := range without {
		for _, lock := range []etagstore.Locker{nil, &swLocks{}} {
			if err := s.SweepEvery(ctx, time.Minute, lock); !errors.Is(err, etagstore.ErrInvalidInput) {
				t.Errorf("SweepEvery of a Store without an Expiry index (%d indexes), lock %v = %v, want ErrInvalidInput", i*2, lock != nil, err)
			}
		}
		if n, err := s.Sweep(ctx); n != 0 || !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("Sweep of a Store without an Expiry index (%d indexes) = %d, %v; want ErrInvalidInput", i*2, n, err)
		}
	}
	// A period of exactly a millisecond is taken.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.SweepEvery(cctx, time.Millisecond, nil); err != nil {
		t.Errorf("SweepEvery(1ms) with a cancelled context = %v, want nil", err)
	}
}

// swNoSleep is a clock whose Sleep fails at once.
type swNoSleep struct{}

func (swNoSleep) Now() time.Time { return swSweepAt }
func (swNoSleep) Sleep(context.Context, time.Duration) error {
	return errors.New("storetest: the case does not sleep")
}

// cutDoc is the document type of the Cutoff case: it expires at At
// (nanoseconds since 1970; 0: never), to the nanosecond.
type cutDoc struct{ At int64 }

var cutExpiry = etagstore.Expiry(func(d cutDoc) time.Time {
	if d.At == 0 {
		return time.Time{}
	}
	return time.Unix(0, d.At)
})

// Cutoff: a sweep deletes exactly the documents expired by its clock
// less Options.ExpirySkew (the default, 5 s, and none), to the instant:
// one a nanosecond past that cutoff, or later within its millisecond,
// stays, and with no skew a Get by the sweeper's own clock still reads
// every document the sweep left as live. The clock reads 300 µs into a
// millisecond.
func (r SweepRig) Cutoff(t *testing.T) {
	now := swSweepAt.Add(300 * time.Microsecond)
	for _, c := range []struct {
		name string
		skew time.Duration // Options.ExpirySkew
		back time.Duration // the cutoff's distance behind now
	}{{"NoSkew", -1, 0}, {"DefaultSkew", 0, 5 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			b := r.New(t)
			cutoff := now.Add(-c.back)
			writer := etagstore.New[cutDoc](b, &etagstore.Options{Clock: newSwClock(swT0)}, cutExpiry)
			offsets := []time.Duration{-time.Second, -time.Millisecond, -time.Nanosecond, 0, time.Nanosecond, 400 * time.Microsecond, 699 * time.Microsecond, time.Millisecond, time.Second}
			keys := map[string]time.Duration{}
			for i, off := range offsets {
				key := swKey(b, "c", fmt.Sprintf("k%02d", i))
				keys[key] = off
				if _, err := writer.Create(ctx, key, cutDoc{At: cutoff.Add(off).UnixNano()}); err != nil {
					t.Fatal(err)
				}
			}
			sweeper := etagstore.New[cutDoc](b, &etagstore.Options{Clock: newSwClock(now), ExpirySkew: c.skew}, cutExpiry)
			n, err := sweeper.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			raw := etagstore.New[cutDoc](b, &etagstore.Options{CacheSize: -1})
			gone := 0
			for key, off := range keys {
				_, err := raw.Get(ctx, key)
				switch {
				case err != nil && !errors.Is(err, etagstore.ErrNotFound):
					t.Fatal(err)
				case err != nil:
					gone++
					if off > 0 {
						t.Errorf("%q, expiring %v after the cutoff, was swept", key, off)
					}
				case off <= 0:
					t.Errorf("%q, expired %v before the cutoff, survived the sweep", key, -off)
				case c.skew < 0:
					if _, err := sweeper.Get(ctx, key); err != nil {
						t.Errorf("Get(%q) by the sweeper's clock: %v; the sweep left it, so it is live", key, err)
					}
				}
			}
			if n != gone || gone != 4 {
				t.Errorf("Sweep = %d; it deleted %d documents; want 4, those expired by the cutoff", n, gone)
			}
		})
	}
}
