package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/retry"
)

// This file builds and repairs an index's entries for documents written
// before it existed, or by a writer that did not declare it (Reindex).
// A page of documents at a time: its entries are committed in batches of
// one scope, as a hand-written loop would (fast path: nothing read);
// a batch refused because some entries exist reads them and goes on.
// Then the page is listed again (keys and ETags alone, bounded by its
// first and last keys, where the backend can:
// driver.Abilities.VersionsBetween), and the entries of a document that
// changed meanwhile are checked one by one, so that an entry made for a
// value a concurrent writer has just replaced does not stay
// (reindexrepair.go). The next page is listed, and the last page listed
// again, while a page's batches go, two at a time (reindexoverlap.go).
// Last, the scopes that held entries before the pass wrote any are
// repaired (reindexscopes.go, reindexrepair.go).

// batchSize is how many entries a Reindex commit carries at most (a
// table's entity group transaction takes 100 actions).
const batchSize = 100

// Duplicate is a value of a unique index that two documents hold.
type Duplicate struct{ Value, Key, Other string }

// Rebuilt is what a Reindex pass found: written by the batches in flight
// together (reindexoverlap.go), under mu.
type Rebuilt struct {
	mu         sync.Mutex
	Duplicates []Duplicate
	scopes     scopes    // the scopes met, and those to repair (reindexscopes.go)
	confirmed  confirmed // the entries the pass wrote or found right in those (confirmed.go)
}

// want is one entry a document needs.
type want struct {
	key   string // the entry's
	entry Entry
	scope string
	etag  driver.ETag // of the document, as the page read it
}

// ReindexPage is how many documents a page of Reindex holds: 999, so
// that on tables a page and the document that tells whether more follow
// come in one query of the service's 1,000 entities (a page of 1,000
// took a second query, for that one document). A pass holds three pages
// at most (reindexoverlap.go).
const ReindexPage = 999

// Reindex builds d's entries for every document of the backend, a page
// of ReindexPage at a time (rebuild; the next page is listed, and the
// last one rechecked, meanwhile), then repairs the entries of every
// scope it met that held entries of d before it wrote any there
// (Repair).
// It returns the values of a unique index that two documents hold; the
// entry stays with the document that held it first. Over a backend that
// keeps no entries, an expiry index has none to build.
func (s *Set) Reindex(ctx context.Context, d Def) ([]Duplicate, error) {
	if err := s.Usable(); err != nil {
		return nil, err
	}
	if s.Entryless() {
		return nil, nil // an Expiry over a backend that keeps no entries: nothing to build
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops a page listed ahead, and a recheck behind, when a page fails
	out := Rebuilt{confirmed: confirmed{}}
	next := s.listAhead(ctx, "")
	behind := rechecked() // the last page's recheck
	for from := ""; ; {
		l := <-next
		if l.err != nil {
			return nil, l.err
		}
		page := l.items
		if len(page) == 0 {
			break
		}
		through := page[len(page)-1].Key
		if l.more {
			next = s.listAhead(ctx, through)
		}
		if err := s.rebuild(ctx, d, page, &out); err != nil {
			return nil, err
		}
		if err := <-behind; err != nil {
			return nil, err
		}
		behind = s.recheckBehind(ctx, d, page, from, through)
		if !l.more {
			break
		}
		from = through
	}
	if err := <-behind; err != nil {
		return nil, err
	}
	for _, scope := range out.scopes.order {
		if err := s.Repair(ctx, d, scope, out.confirmed); err != nil {
			return nil, err
		}
	}
	return out.Duplicates, nil
}

// rebuild makes d's entries for docs, one page of a listing, in batches
// of one scope (commitBatches), reporting in out the values two
// documents hold.
func (s *Set) rebuild(ctx context.Context, d Def, docs []driver.Item, out *Rebuilt) error {
	if err := s.Usable(); err != nil {
		return err
	}
	pos := slices.IndexFunc(s.Defs, func(x Def) bool { return x.Name == d.Name })
	var wants []want
	for _, it := range docs {
		vals, err := s.Values(it.Key, it.Data)
		if err != nil {
			return err
		}
		scope, err := s.space.Scope(it.Key)
		if err != nil {
			return err
		}
		if err := s.meet(ctx, d, &out.scopes, scope); err != nil {
			return err
		}
		for _, v := range vals[pos] {
			p := s.step(d, scope, strings.TrimPrefix(it.Key, scope), Entry{d.Name, v, it.Key}, false)
			wants = append(wants, want{key: p.action.Key, entry: p.entry, scope: scope, etag: it.ETag})
		}
	}
	slices.SortStableFunc(wants, func(a, b want) int { return strings.Compare(a.scope, b.scope) })
	wants = dedupe(wants, out)
	var batches [][]want
	for len(wants) > 0 {
		n := 1
		for n < len(wants) && n < batchSize && wants[n].scope == wants[0].scope {
			n++
		}
		batches = append(batches, wants[:n])
		wants = wants[n:]
	}
	return s.commitBatches(ctx, d, batches, out)
}

// confirm remembers acts, committed in scope, at etags (confirmed.go),
// when scope is one the pass repairs.
func (out *Rebuilt) confirm(scope string, acts []driver.Action, etags []driver.ETag) {
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.confirmed == nil || !out.scopes.held[scope] {
		return
	}
	for i, a := range acts {
		if i < len(etags) {
			out.confirmed.add(a.Key, etags[i])
		}
	}
}

// duplicate reports dup.
func (out *Rebuilt) duplicate(dup Duplicate) {
	out.mu.Lock()
	defer out.mu.Unlock()
	out.Duplicates = append(out.Duplicates, dup)
}

// dedupe drops the second of two documents of the page that want one
// entry (a unique value both hold), reporting it.
func dedupe(ws []want, out *Rebuilt) []want {
	first := make(map[string]string, len(ws))
	return slices.DeleteFunc(ws, func(w want) bool {
		if doc, ok := first[w.key]; ok {
			out.duplicate(Duplicate{Value: w.entry.Value, Key: doc, Other: w.entry.Doc})
			return true
		}
		first[w.key] = w.entry.Doc
		return false
	})
}

// commitWants commits the entries ws need, of one scope: created (a
// lookup's written), or, when some exist, each as what exists calls for,
// read again and sent again for as long as entries change between the
// read and the commit (a writer, or this pass's recheck of the last
// page, working on them meanwhile). A commit whose answer was lost, or
// that the service refused unapplied (throttled, after a pause), is sent
// again, up to sendAttempts times: a unique index's entries read first,
// so that those it made are found the documents' own.
func (s *Set) commitWants(ctx context.Context, d Def, ws []want, out *Rebuilt) error {
	scope := ws[0].scope
	acts := make([]driver.Action, len(ws))
	for i, w := range ws {
		acts[i] = s.wantAction(d, w, "", false)
	}
	for attempt := 1; ; {
		etags, err := s.commit(ctx, acts)
		switch {
		case err == nil:
			out.confirm(scope, acts, etags)
			return nil
		case ambiguous(err) || errors.Is(err, driver.ErrNotApplied):
			if attempt == sendAttempts || ctx.Err() != nil {
				return unavailable(ctx, err)
			}
			if err := pause(ctx, attempt, err); err != nil {
				return err
			}
			if attempt++; !d.Unique {
				continue // a lookup's writes, sent again as they are
			}
		case !d.Unique || !errors.Is(err, driver.ErrExists) && !errors.Is(err, driver.ErrConflict) && !errors.Is(err, driver.ErrNotFound):
			return err
		}
		if ws, acts, err = s.rewant(ctx, d, ws, out); err != nil || len(ws) == 0 {
			return err
		}
	}
}

// pause waits before a commit refused unapplied (throttled) is sent
// again: 50 ms, doubled at each attempt. A lost answer is sent again at
// once.
func pause(ctx context.Context, attempt int, err error) error {
	if !errors.Is(err, driver.ErrNotApplied) {
		return nil
	}
	return retry.System{}.Sleep(ctx, 50*time.Millisecond<<(attempt-1))
}

// unavailable is err, a commit's last that may not have been applied, as
// Reindex's error: matching ErrUnavailable (a lost answer has no
// sentinel of its own), or the context's end.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil || driver.SentinelOf(err) != nil {
		return err
	}
	return fmt.Errorf("%w: a Reindex commit sent %d times: %w", driver.ErrUnavailable, sendAttempts, err)
}

// resend commits acts, sent again as they are when the answer is lost or
// the service refuses them unapplied, up to sendAttempts times (the
// deletes of stale entries: on the entry's version, so that one that
// landed is refused, not repeated).
func (s *Set) resend(ctx context.Context, acts []driver.Action) error {
	for attempt := 1; ; attempt++ {
		_, err := s.commit(ctx, acts)
		switch {
		case !ambiguous(err) && !errors.Is(err, driver.ErrNotApplied):
			return err
		case attempt == sendAttempts || ctx.Err() != nil:
			return unavailable(ctx, err)
		}
		if err := pause(ctx, attempt, err); err != nil {
			return err
		}
	}
}

// rewant reads the entries ws want (together where the backend can),
// some of which exist: it returns those still to write, each with its
// action (created if missing, replaced on its ETag if stale), leaving
// out those that are their documents' already (confirmed) and those whose
// value another document holds: a Duplicate, if the want's document still
// holds it too (else a writer changed it since the page was read, and the
// recheck sees to what was made from that read).
func (s *Set) rewant(ctx context.Context, d Def, ws []want, out *Rebuilt) ([]want, []driver.Action, error) {
	found, err := s.readEntries(ctx, ws)
	if err != nil {
		return nil, nil, err
	}
	var left []want
	var acts []driver.Action
	for i, w := range ws {
		it := found[i]
		if it.ETag == "" {
			left, acts = append(left, w), append(acts, s.wantAction(d, w, "", false))
			continue
		}
		held, derr := decode(it)
		if derr == nil && held.Doc == w.entry.Doc {
			out.confirm(w.scope, []driver.Action{{Key: it.Key}}, []driver.ETag{it.ETag})
			continue // already the document's
		}
		if derr == nil && held.Value == w.entry.Value {
			holds, err := s.holds(ctx, held)
			if err != nil {
				return nil, nil, err
			}
			if holds {
				// A duplicate only if w's document still holds the value:
				// the page may have read it before a writer moved it on.
				if mine, err := s.holds(ctx, w.entry); err != nil {
					return nil, nil, err
				} else if mine {
					out.duplicate(Duplicate{Value: w.entry.Value, Key: held.Doc, Other: w.entry.Doc})
				}
				continue
			}
		}
		left, acts = append(left, w), append(acts, s.wantAction(d, w, it.ETag, true)) // stale: replaced on its ETag
	}
	return left, acts, nil
}

// readEntries reads the entries ws want: each as stored, or, missing,
// with no ETag.
func (s *Set) readEntries(ctx context.Context, ws []want) ([]driver.Item, error) {
	keys := make([]string, len(ws))
	for i, w := range ws {
		keys[i] = w.key
	}
	if many := s.Backend.Abilities().ReadMany; many != nil {
		return many(ctx, keys)
	}
	out := make([]driver.Item, len(keys))
	for i, k := range keys {
		it, err := s.Backend.Read(ctx, k)
		switch {
		case errors.Is(err, driver.ErrNotFound):
			out[i] = driver.Item{Key: k}
		case err != nil:
			return nil, err
		default:
			out[i] = it
		}
	}
	return out, nil
}

// wantAction is the write of w's entry: created, or over etag.
func (s *Set) wantAction(d Def, w want, etag driver.ETag, over bool) driver.Action {
	a := driver.Action{Key: w.key, Write: driver.Write{Data: w.entry.data(), Cond: driver.Cond{Kind: driver.CondCreate}}}
	switch {
	case !d.Unique:
		a.Write.Cond = driver.Cond{Kind: driver.CondNone}
	case over:
		a.Write.Cond = driver.IfMatch(etag)
	}
	return a
}

func (s *Set) commit(ctx context.Context, acts []driver.Action) ([]driver.ETag, error) {
	return s.Backend.Abilities().Commit(ctx, acts)
}
