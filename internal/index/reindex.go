package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// This file builds and repairs an index's entries for documents written
// before it existed, or by a writer that did not declare it (Reindex).
// A page of documents at a time: its entries are committed in batches of
// one scope, as a hand-written loop would (fast path: nothing read);
// a batch refused because some entries exist reads them and goes on;
// then the page is listed again (keys and ETags alone where the backend
// can: driver.Abilities.VersionsPage), and the entries of a document that
// changed meanwhile are checked one by one, so that an entry made for a
// value a concurrent writer has just replaced does not stay. The next
// page is listed while a page's batches go (listahead.go). Last, the
// scopes that held entries before the pass wrote any are repaired
// (reindexscopes.go).

// batchSize is how many entries a Reindex commit carries at most (a
// table's entity group transaction takes 100 actions).
const batchSize = 100

// Duplicate is a value of a unique index that two documents hold.
type Duplicate struct{ Value, Key, Other string }

// Rebuilt is what a Reindex pass found.
type Rebuilt struct {
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

// ReindexPage is how many documents Reindex holds at once: 999, so that
// on tables a page and the document that tells whether more follow come
// in one query of the service's 1,000 entities (a page of 1,000 took a
// second query, for that one document), and so does the page listed
// again.
const ReindexPage = 999

// Reindex builds d's entries for every document of the backend, a page
// of ReindexPage at a time (Rebuild; the next page is listed
// meanwhile), then repairs the entries of every scope it met that held
// entries of d before it wrote any there (Repair).
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
	defer cancel() // stops a page listed ahead when a page fails
	out := Rebuilt{confirmed: confirmed{}}
	versions := s.Backend.ListPage
	if vp := s.Backend.Abilities().VersionsPage; vp != nil {
		versions = vp // keys and ETags are all recheck reads
	}
	next := s.listAhead(ctx, "")
	for after := ""; ; {
		l := <-next
		if l.err != nil {
			return nil, l.err
		}
		page := l.items
		if len(page) == 0 {
			break
		}
		from := after
		if after = page[len(page)-1].Key; l.more {
			next = s.listAhead(ctx, after)
		}
		relist := func() ([]driver.Item, error) {
			items, _, err := versions(ctx, "", from, len(page))
			return items, err
		}
		if err := s.Rebuild(ctx, d, page, relist, &out); err != nil {
			return nil, err
		}
		if !l.more {
			break
		}
	}
	for _, scope := range out.scopes.order {
		if err := s.Repair(ctx, d, scope, out.confirmed); err != nil {
			return nil, err
		}
	}
	return out.Duplicates, nil
}

// Rebuild makes d's entries for docs, one page of a listing; relist
// lists that page again, to learn which documents changed meanwhile (the
// keys and ETags of its items are all it reads: VersionsPage where the
// backend has it).
func (s *Set) Rebuild(ctx context.Context, d Def, docs []driver.Item, relist func() ([]driver.Item, error), out *Rebuilt) error {
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
	for len(wants) > 0 {
		n := 1
		for n < len(wants) && n < batchSize && wants[n].scope == wants[0].scope {
			n++
		}
		if err := s.commitWants(ctx, d, wants[:n], out); err != nil {
			return err
		}
		wants = wants[n:]
	}
	return s.recheck(ctx, d, docs, relist)
}

// confirm remembers acts, committed in scope, at etags (confirmed.go),
// when scope is one the pass repairs.
func (out *Rebuilt) confirm(scope string, acts []driver.Action, etags []driver.ETag) {
	if out.confirmed == nil || !out.scopes.held[scope] {
		return
	}
	for i, a := range acts {
		if i < len(etags) {
			out.confirmed.add(a.Key, etags[i])
		}
	}
}

// dedupe drops the second of two documents of the page that want one
// entry (a unique value both hold), reporting it.
func dedupe(ws []want, out *Rebuilt) []want {
	first := make(map[string]string, len(ws))
	return slices.DeleteFunc(ws, func(w want) bool {
		if doc, ok := first[w.key]; ok {
			out.Duplicates = append(out.Duplicates, Duplicate{Value: w.entry.Value, Key: doc, Other: w.entry.Doc})
			return true
		}
		first[w.key] = w.entry.Doc
		return false
	})
}

// commitWants commits the entries ws need, of one scope: created (a
// lookup's written), or, when some exist, each as what exists calls for.
func (s *Set) commitWants(ctx context.Context, d Def, ws []want, out *Rebuilt) error {
	acts := make([]driver.Action, len(ws))
	for i, w := range ws {
		acts[i] = s.wantAction(d, w, "", false)
	}
	etags, err := s.commit(ctx, acts)
	if err == nil {
		out.confirm(ws[0].scope, acts, etags)
	}
	if err == nil || !d.Unique || !errors.Is(err, driver.ErrExists) {
		return err
	}
	// Some exist: read them (together where the backend can), and write
	// what each calls for.
	found, err := s.readEntries(ctx, ws)
	if err != nil {
		return err
	}
	acts = acts[:0]
	for i, w := range ws {
		it := found[i]
		if it.ETag == "" {
			acts = append(acts, s.wantAction(d, w, "", false))
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
				return err
			}
			if holds {
				out.Duplicates = append(out.Duplicates, Duplicate{Value: w.entry.Value, Key: held.Doc, Other: w.entry.Doc})
				continue
			}
		}
		acts = append(acts, s.wantAction(d, w, it.ETag, true)) // stale: replaced on its ETag
	}
	if len(acts) == 0 {
		return nil
	}
	etags, err = s.commit(ctx, acts)
	if err == nil {
		out.confirm(ws[0].scope, acts, etags)
	}
	if errors.Is(err, driver.ErrExists) || errors.Is(err, driver.ErrConflict) {
		return fmt.Errorf("%w: index %q: entries changed while Reindex wrote them; run it again", driver.ErrConflict, d.Name)
	}
	return err
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

// recheck lists docs' page again: for a document that changed or went
// since it was read, each of d's entries naming it is checked against
// what it holds now (Repair's rule).
func (s *Set) recheck(ctx context.Context, d Def, docs []driver.Item, relist func() ([]driver.Item, error)) error {
	now, err := relist()
	if err != nil {
		return err
	}
	cur := make(map[string]driver.ETag, len(now))
	for _, it := range now {
		cur[it.Key] = it.ETag
	}
	pos := slices.IndexFunc(s.Defs, func(x Def) bool { return x.Name == d.Name })
	for _, it := range docs {
		if cur[it.Key] == it.ETag {
			continue
		}
		vals, err := s.Values(it.Key, it.Data)
		if err != nil {
			return err
		}
		scope, _ := s.space.Scope(it.Key)
		for _, v := range vals[pos] {
			p := s.step(d, scope, strings.TrimPrefix(it.Key, scope), Entry{d.Name, v, it.Key}, false)
			if err := s.repairEntry(ctx, p.action.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// repairEntry deletes the entry at key unless its document holds its
// value now (see repair).
func (s *Set) repairEntry(ctx context.Context, key string) error {
	it, err := s.Backend.Read(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return s.repair(ctx, []driver.Item{it})
}

// repair deletes each of entries (as read) whose document does not hold
// its value now: conditioned on the entry's version, so that a writer
// that has taken it meanwhile keeps it. The documents are read together
// where the backend can (ReadMany).
func (s *Set) repair(ctx context.Context, entries []driver.Item) error {
	es := make([]Entry, len(entries))
	docs := make([]string, 0, len(entries))
	for i, it := range entries {
		es[i], _ = decode(it)
		if es[i].Doc != "" {
			docs = append(docs, es[i].Doc)
		}
	}
	held, err := s.readDocs(ctx, docs)
	if err != nil {
		return err
	}
	for i, it := range entries {
		if e := es[i]; e.Doc != "" {
			if data, ok := held[e.Doc]; ok {
				holds, err := s.Holds(e.Doc, data, e.Index, e.Value)
				if err != nil || holds {
					continue // a document T cannot read keeps its entries
				}
			}
		}
		_, err := s.commit(ctx, []driver.Action{{Key: it.Key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(it.ETag)}}})
		if err != nil && !errors.Is(err, driver.ErrConflict) && !errors.Is(err, driver.ErrNotFound) {
			return err // (changed meanwhile: its writer keeps it)
		}
	}
	return nil
}

// readDocs reads keys (of one scope): the data of each that exists.
func (s *Set) readDocs(ctx context.Context, keys []string) (map[string][]byte, error) {
	items, err := s.readItems(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(items))
	for k, it := range items {
		out[k] = it.Data
	}
	return out, nil
}

// readItems reads keys (of one scope) together where the backend can
// (ReadMany), one by one otherwise: each that exists, by key.
func (s *Set) readItems(ctx context.Context, keys []string) (map[string]driver.Item, error) {
	out := make(map[string]driver.Item, len(keys))
	if many := s.Backend.Abilities().ReadMany; many != nil && len(keys) > 1 {
		items, err := many(ctx, keys)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.ETag != "" {
				out[it.Key] = it
			}
		}
		return out, nil
	}
	for _, k := range keys {
		it, err := s.Backend.Read(ctx, k)
		switch {
		case errors.Is(err, driver.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out[k] = it
		}
	}
	return out, nil
}

// Repair deletes d's entries in scope whose document does not hold
// their value now: left by a writer that did not declare the index, or
// by a Reindex that met a concurrent write. The entries listed at a
// version sure holds (this pass wrote them, or found them right, and
// its recheck kept them) are not read again.
func (s *Set) Repair(ctx context.Context, d Def, scope string, sure confirmed) error {
	var chunk []driver.Item
	for it, err := range s.Backend.List(ctx, s.space.Key(scope, indexPrefix(d))) {
		if err != nil {
			return err
		}
		if sure.has(it.Key, it.ETag) {
			continue // as this pass wrote it, or found it right
		}
		if chunk = append(chunk, it); len(chunk) == batchSize {
			if err := s.repair(ctx, chunk); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
	}
	return s.repair(ctx, chunk)
}
