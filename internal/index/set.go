// Package index keeps a Store's indexes: the entries each document write
// implies beside it (unique and lookup), made in the same atomic request
// as the document (engine.Implier), and read back by value. It is
// untyped: the Store gives it the values a stored document holds.
package index

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// Def is one index of a Store.
type Def struct {
	Name   string
	Unique bool // one document per value (else several: a lookup index)
	// Expires: the document's one value is the instant it expires (Stamp),
	// and its entry is named to list in time order (expiryName). Its
	// entries are kept as a lookup index's are.
	Expires bool
}

// Set is a Store's indexes over its backend.
type Set struct {
	Defs    []Def
	Backend driver.Backend
	// Values returns, per Def, the values a stored document holds
	// (Data as its codec made it): sorted, without duplicates or "";
	// at most one for a unique index. Its error refuses the write.
	Values func(key string, data []byte) ([][]string, error)

	space  *driver.Entries
	check  func([]driver.Action) error
	recent recent // the unique entries it wrote lately (Pending's prediction)
}

// New returns the Set of defs over b, or an error refusing them.
func New(b driver.Backend, defs []Def, values func(key string, data []byte) ([][]string, error)) (*Set, error) {
	seen := map[string]bool{}
	for _, d := range defs {
		if err := CheckName(d.Name); err != nil {
			return nil, err
		}
		if seen[d.Name] {
			return nil, driver.Errorf(driver.ErrInvalidInput, "index %q is declared twice", d.Name)
		}
		seen[d.Name] = true
	}
	a := b.Abilities()
	return &Set{Defs: defs, Backend: b, Values: values, space: a.Entries, check: a.CheckCommit}, nil
}

// Values is the values of v, key's document, in the index named name
// whose function is of: sorted, without duplicates or "". A panic of of
// is an error (ErrInvalidInput) of the write or read asking.
func Values[T any](name, key string, of func(T) []string, v T) (vals []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = driver.Errorf(driver.ErrInvalidInput, "the function of index %q panicked on %q: %v", name, key, r)
		}
	}()
	vals = slices.DeleteFunc(slices.Clone(of(v)), func(s string) bool { return s == "" })
	slices.Sort(vals)
	return slices.Compact(vals), nil
}

// Refusing is the engine.Implier of indexes whose declaration was
// refused: every write fails with Err.
type Refusing struct{ Err error }

func (r Refusing) Imply(_ context.Context, _ engine.Request, m any) ([]driver.Action, any, error) {
	return nil, m, r.Err
}

func (r Refusing) Refused(_ context.Context, _ engine.Request, _ []driver.Action, _ int, err error, m any) (any, error) {
	return m, err
}

// Usable refuses writes when the backend keeps no entries or cannot
// commit them with a document (errors.ErrUnsupported). An expiry index
// alone needs none: over such a backend it keeps no entries (Entryless),
// and the sweeper lists the documents instead.
func (s *Set) Usable() error {
	a := s.Backend.Abilities()
	if s.Entryless() {
		return nil
	}
	if s.space == nil || a.Commit == nil {
		return fmt.Errorf("%w: a Store with indexes needs a backend that commits index entries with documents (blobs cannot)", errors.ErrUnsupported)
	}
	return nil
}

// Entryless reports whether the Set keeps no entries: its backend keeps
// none (driver.Abilities.Entries) and its one index is an expiry index.
func (s *Set) Entryless() bool {
	return s.space == nil && len(s.Defs) == 1 && s.Defs[0].Expires
}

// validate runs the index functions on the document w writes, as plan
// does, when no entries are kept: a function that fails (or panics)
// refuses the write all the same.
func (s *Set) validate(w engine.KeyWrite) error {
	if !w.Delete && w.Write.Mode != driver.ModeMerge {
		if _, err := s.Values(w.Key, w.Write.Data); err != nil {
			return err
		}
	}
	return nil
}

// memo is what a delivery learnt of entries, read before it sends or
// from refusals: a key's current ETag ("" : missing), for an entry that
// may be written over on it (missing, stale, or one document's own). An
// entry another document holds now is never in it.
type memo map[string]learnt

// learnt is an entry's version as a delivery read it, and the one
// document whose own entry it was ("": missing or stale, anyone's to
// write over). A batch's writes change between its sends: an entry
// learnt as one document's own is not another's to take. dropped marks
// an entry a write releases, learnt missing: the write is sent again
// without its delete, and checks it once landed (planner.dropped).
type learnt struct {
	etag    driver.ETag
	doc     string
	dropped bool
}

// of is the version of key's entry known writable by doc's write.
func (m memo) of(key, doc string) (driver.ETag, bool) {
	l, ok := m[key]
	if !ok || l.doc != "" && l.doc != doc {
		return "", false
	}
	return l.etag, true
}

// predicted is a memo of a batch that predicted its takers rather than
// read them (planner.pending, not wary): its send reads no entry first
// either (precheck), unless a value taken is one its Set wrote lately.
type predicted memo

// memoOf is m as a memo, and whether it is predicted.
func memoOf(m any) (memo, bool) {
	switch v := m.(type) {
	case memo:
		return v, false
	case predicted:
		return memo(v), true
	}
	return nil, false
}

// planned is one entry's action, as the writes of a request imply it.
type planned struct {
	action    driver.Action
	entry     Entry
	def       Def
	release   bool // a delete (else a write)
	overwrite bool // a write of an entry another write of the request releases
	set       *Set // the Set of the Store whose document implies it
}

// Imply returns the entry actions req implies (engine.Implier). A
// request that takes several unique values (a batch's) reads their
// entries first, together (precheck): every value held elsewhere is
// found before anything is sent, not one refusal at a time.
func (s *Set) Imply(ctx context.Context, req engine.Request, m any) ([]driver.Action, any, error) {
	return s.alone().imply(ctx, req, m)
}

// Pending is planner.pending, for a request of s's Store alone.
func (s *Set) Pending(ctx context.Context, req engine.Request, m any, wary bool) (map[string]*UniqueError, any) {
	return s.alone().pending(ctx, req, m, wary)
}

// Refused is planner.refused, for a request of s's Store alone.
func (s *Set) Refused(ctx context.Context, req engine.Request, implied []driver.Action, i int, err error, m any) (any, error) {
	return s.alone().refused(ctx, req, implied, i, err, m)
}

// Landed is planner.landed, for a request of s's Store alone.
func (s *Set) Landed(ctx context.Context, req engine.Request, implied []driver.Action, m any) {
	s.alone().landed(ctx, req, implied, m)
}

// landed records, req having landed with implied, the unique entries it
// wrote as their Sets' recent, and forgets those it deleted: only what
// committed predicts what is held. Then it checks the entries req
// released and did not delete, having learnt them missing (dropped).
func (x planner) landed(ctx context.Context, req engine.Request, implied []driver.Action, m any) {
	defer x.dropped(ctx, m)
	for _, a := range implied {
		if a.Delete {
			for _, w := range req {
				if s, _ := x.of(w.Key); s != nil {
					s.recent.forget(a.Key)
				}
			}
			continue
		}
		e, err := decode(driver.Item{Key: a.Key, Data: a.Write.Data})
		if err != nil {
			continue
		}
		if s, _ := x.of(e.Doc); s != nil && s.unique(e.Index) {
			s.recent.add(a.Key, e.Doc)
		}
	}
}

// dropped checks, a write having landed, each entry it released without
// deleting it, having learnt it missing: a Reindex may have made it
// meanwhile from the document before the write, and listed the page
// again before the write landed (the document unchanged then), so that
// nothing else would delete it. One read each; an entry whose document
// does not hold its value now is deleted on its version (repair). Best
// effort: the write has landed, and GetBy checks an entry against its
// document.
func (x planner) dropped(ctx context.Context, m any) {
	known, _ := memoOf(m)
	for key, l := range known {
		if !l.dropped {
			continue
		}
		it, err := x.lead.Backend.Read(ctx, key)
		if err != nil {
			continue // missing still, or unknown: GetBy checks
		}
		judge := x.lead
		if e, err := decode(it); err == nil {
			if s, err := x.of(e.Doc); err == nil && s != nil {
				judge = s
			}
		}
		_ = judge.repair(ctx, []driver.Item{it})
	}
}

// unique reports whether s declares a unique index named name.
func (s *Set) unique(name string) bool {
	for _, d := range s.Defs {
		if d.Name == name {
			return d.Unique
		}
	}
	return false
}

// alone is the planner of requests whose writes are all of s's Store.
func (s *Set) alone() planner {
	return planner{lead: s, of: func(string) (*Set, error) { return s, nil }}
}

// planner plans the entries of one request: of is the Set of the Store
// that writes a key (nil: a Store that keeps no indexes; an error: one
// whose indexes were refused); lead is the Set whose backend reads
// entries and checks the commit. A transaction's writes may be of several
// Stores (Mixed): each write's entries are its own Store's, planned
// together, so that a value one Store's document frees and another's
// takes is one write, as within one Store.
type planner struct {
	lead *Set
	of   func(key string) (*Set, error)
}

func (x planner) imply(ctx context.Context, req engine.Request, m any) ([]driver.Action, any, error) {
	known, pred := memoOf(m)
	plan, taken, err := x.plan(req)
	if err != nil {
		return nil, m, err
	}
	if len(taken) == 0 {
		var err error
		if known, taken, err = x.precheck(ctx, plan, known, pred); err != nil {
			return nil, known, err
		}
	}
	if len(taken) > 0 {
		return nil, known, taken.err()
	}
	out := make([]driver.Action, 0, len(plan))
	for _, p := range plan {
		a, ok := p.condition(known)
		if ok {
			out = append(out, a)
		}
	}
	if x.lead.check != nil && len(out) > 0 {
		if err := x.lead.check(append(req.Actions(), out...)); err != nil {
			return nil, known, fmt.Errorf("%w (with its index entries)", err)
		}
	}
	if pred {
		return out, predicted(known), nil
	}
	return out, known, nil
}

// plan is the entry actions the writes of req imply, one per entry (a
// value one write frees and another takes is one write: merge), and the
// values two writes of req take (taken). A write of a Store whose Set
// keeps no entries (an expiry index alone, over a backend without them)
// only has its values checked.
func (x planner) plan(req engine.Request) (plan []*planned, taken Duplicates, err error) {
	byKey := map[string]*planned{}
	for _, w := range req {
		if w.Check {
			continue
		}
		set, err := x.of(w.Key)
		switch {
		case err != nil:
			return nil, nil, err
		case set == nil:
			continue
		}
		if err := set.Usable(); err != nil {
			return nil, nil, err
		}
		if set.Entryless() {
			if err := set.validate(w); err != nil {
				return nil, nil, err
			}
			continue
		}
		steps, err := set.steps(w)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range steps {
			prev, ok := byKey[p.action.Key]
			if !ok {
				byKey[p.action.Key] = p
				plan = append(plan, p)
				continue
			}
			if e := merge(prev, p); e != nil {
				taken = append(taken, e)
			}
		}
	}
	return plan, taken, nil
}

// pending is, sending no write, the writes of req (by key) that take a
// unique value held elsewhere (engine.Pending): by an earlier write of
// req (UniqueError.Pending), or by a stored document. wary, the stored
// values are read as precheck reads them: what Imply would refuse, one
// write at a time. Otherwise nothing is read: a value whose entry the
// Set wrote lately is most likely held (Likely, naming no holder), and
// any other is left to the request's conditions.
func (x planner) pending(ctx context.Context, req engine.Request, m any, wary bool) (map[string]*UniqueError, any) {
	known, _ := memoOf(m)
	plan, taken, err := x.plan(req)
	if err != nil {
		return nil, m // Imply refuses the request as a whole
	}
	if !wary {
		taken = append(taken, x.frozen(req).likely(plan, known)...)
		m = predicted(known) // its send reads nothing first either
	} else if learnt, held, err := x.precheck(ctx, plan, known, false); err == nil {
		known, taken, m = learnt, append(taken, held...), learnt
	}
	if len(taken) == 0 {
		return nil, m
	}
	return Takers(taken), m
}

// guessHolders is the documents that hold, most likely, the values
// takes take: those their Sets' recent entries named, other than the
// takers. precheck reads them with the entries, so that a held value
// costs one read, not two in a row.
func guessHolders(takes []*planned) []string {
	var docs []string
	for _, p := range takes {
		if doc, ok := p.set.recent.holder(p.action.Key); ok && doc != p.entry.Doc && !slices.Contains(docs, doc) {
			docs = append(docs, doc)
		}
	}
	return docs
}

// readHolders reads the documents held's entries (by entry key) name,
// by which takes judge whether each holds its value now. A guessed read
// (made with the entries, and perhaps before them: ReadMany's keys are
// not all read at one instant) is taken only where it shows the document
// keeping the value, as it did at that instant; a document it shows
// missing, or keeping another value, is read again after the entries, so
// that a value is never judged free on a read older than its entry.
func (x planner) readHolders(ctx context.Context, takes []*planned, held map[string]Entry, guessed []driver.Item) (map[string][]byte, error) {
	found := make(map[string][]byte, len(guessed))
	for _, it := range guessed {
		if it.ETag != "" {
			found[it.Key] = it.Data
		}
	}
	docs := make(map[string][]byte, len(held))
	var rest []string
	for _, p := range takes {
		e, ok := held[p.action.Key]
		if !ok {
			continue
		}
		if data, ok := found[e.Doc]; ok {
			if keeps, err := x.keeps(p.set, e, data); err == nil && keeps {
				docs[e.Doc] = data
				continue
			}
		}
		if !slices.Contains(rest, e.Doc) {
			rest = append(rest, e.Doc)
		}
	}
	if len(rest) == 0 {
		return docs, nil
	}
	more, err := x.lead.readDocs(ctx, rest)
	if err != nil {
		return nil, err
	}
	for _, k := range rest {
		delete(docs, k) // the read after the entries decides
	}
	maps.Copy(docs, more)
	return docs, nil
}

// frozen is x as it plans req now: its Sets of req's keys kept, so that
// a prediction's Confirm, later and on another goroutine, judges as x
// would have without asking the request's owner (a batch's state, which
// moves on).
func (x planner) frozen(req engine.Request) planner {
	sets := make(map[string]*Set, len(req))
	for _, w := range req {
		if s, err := x.of(w.Key); err == nil && s != nil {
			sets[w.Key] = s
		}
	}
	x.of = func(key string) (*Set, error) { return sets[key], nil }
	return x
}

// likely is, reading nothing, the values plan takes whose entries their
// Set wrote lately (and known does not know): most likely held.
func (x planner) likely(plan []*planned, known memo) Duplicates {
	var out Duplicates
	for _, p := range plan {
		if _, learnt := known.of(p.action.Key, p.entry.Doc); p.def.Unique && !p.release && !p.overwrite && !learnt && p.set.recent.has(p.action.Key) {
			out = append(out, &UniqueError{Index: p.def.Name, Value: p.entry.Value, By: p.entry.Doc, likely: true, plan: p, x: x})
		}
	}
	return out
}

// prechecked is how many unique values a request must take for precheck
// to read their entries first, unless one is a value whose entry the Set
// wrote lately (most likely held: read rather than refused).
const prechecked = 2

// precheck reads, together (driver.Abilities.ReadMany), the entries of
// the unique values plan takes that known does not know, when there are
// several (pred, a batch that predicted its takers: never), or when one
// is a value whose entry its Set wrote lately: one held by another
// document that holds it now is taken; one that is the taker's own, or
// stale, is known by its ETag, to be written over; a missing one is
// known missing.
func (x planner) precheck(ctx context.Context, plan []*planned, known memo, pred bool) (memo, Duplicates, error) {
	var keys []string
	var takes []*planned
	recent := false
	for _, p := range plan {
		if _, learnt := known.of(p.action.Key, p.entry.Doc); p.def.Unique && !p.release && !p.overwrite && !learnt {
			keys, takes = append(keys, p.action.Key), append(takes, p)
			recent = recent || p.set.recent.has(p.action.Key)
		}
	}
	many := x.lead.Backend.Abilities().ReadMany
	if (len(keys) < prechecked || pred) && !recent || len(keys) == 0 || many == nil {
		return known, nil, nil
	}
	guesses := guessHolders(takes)
	items, err := many(ctx, slices.Concat(keys, guesses))
	if err != nil {
		return known, nil, err
	}
	guessed := items[len(keys):]
	items = items[:len(keys)]
	if known == nil {
		known = memo{}
	}
	held := map[string]Entry{} // by entry key: entries another document holds
	for i, it := range items {
		e, err := decode(it)
		switch {
		case it.ETag == "" || err != nil || e.Index != takes[i].def.Name:
			known[it.Key] = learnt{etag: it.ETag}
			continue
		case e.Doc == takes[i].entry.Doc:
			known[it.Key] = learnt{etag: it.ETag, doc: e.Doc}
			continue
		}
		known[it.Key] = learnt{etag: it.ETag} // stale, unless held (below)
		held[it.Key] = e
	}
	if len(held) == 0 {
		return known, nil, nil
	}
	docs, err := x.readHolders(ctx, takes, held, guessed)
	if err != nil {
		return known, nil, err
	}
	var taken Duplicates
	for _, p := range takes {
		e, ok := held[p.action.Key]
		if !ok {
			continue
		}
		data, exists := docs[e.Doc]
		if !exists {
			continue // stale: written over on its ETag
		}
		if e.Value != p.entry.Value {
			return known, nil, driver.Errorf(driver.ErrInvalidInput, "index %q: the values %q and %q share a hash", e.Index, e.Value, p.entry.Value)
		}
		if holds, err := x.keeps(p.set, e, data); err != nil || holds {
			taken = append(taken, &UniqueError{Index: e.Index, Value: e.Value, Key: e.Doc, By: p.entry.Doc})
			delete(known, p.action.Key) // held: never written over on this ETag (a later precheck reads it again)
		}
	}
	return known, taken, nil
}

// steps are the entry changes of w: its document's values before (w.Was)
// and after.
func (s *Set) steps(w engine.KeyWrite) ([]*planned, error) {
	switch {
	case w.Write.Mode == driver.ModeMerge:
		return nil, fmt.Errorf("%w: a merge cannot keep a Store's index entries, which need the whole document (use Update or Replace)", errors.ErrUnsupported)
	case !w.WasKnown:
		return nil, fmt.Errorf("%w: this path does not know the version %q has, so it cannot keep the Store's index entries (use Update or Replace)", errors.ErrUnsupported, w.Key)
	}
	var was, now [][]string
	var err error
	if w.Was.Data != nil {
		if was, err = s.Values(w.Key, w.Was.Data); err != nil {
			return nil, err
		}
	}
	if !w.Delete {
		if now, err = s.Values(w.Key, w.Write.Data); err != nil {
			return nil, err
		}
	}
	scope, err := s.space.Scope(w.Key)
	if err != nil {
		return nil, err
	}
	rest := strings.TrimPrefix(w.Key, scope)
	var out []*planned
	for i, d := range s.Defs {
		var before, after []string
		if i < len(was) {
			before = was[i]
		}
		if i < len(now) {
			after = now[i]
		}
		for _, v := range before {
			if !slices.Contains(after, v) {
				out = append(out, s.step(d, scope, rest, Entry{d.Name, v, w.Key}, true))
			}
		}
		for _, v := range after {
			if !slices.Contains(before, v) {
				out = append(out, s.step(d, scope, rest, Entry{d.Name, v, w.Key}, false))
			}
		}
	}
	return out, nil
}

// step is the action on e's entry: its delete (release), or its write.
func (s *Set) step(d Def, scope, rest string, e Entry, release bool) *planned {
	var name string
	switch {
	case d.Unique:
		name = uniqueName(d.Name, e.Value)
	case d.Expires:
		name = expiryName(d.Name, e.Value, rest)
	default:
		name = lookupName(d.Name, e.Value, rest)
	}
	p := &planned{entry: e, def: d, release: release, set: s}
	p.action.Key = s.space.Key(scope, name)
	if !release {
		p.action.Write.Data = e.data()
	}
	return p
}

// merge folds p into prev, an action on the same entry by another write
// of the request: a value one document releases and another takes is
// one write; a value two take is a duplicate.
func merge(prev, p *planned) *UniqueError {
	switch {
	case prev.release && p.release:
		return nil
	case prev.release:
		*prev = *p
		prev.release, prev.action.Delete = false, false
		prev.entry.Doc = p.entry.Doc
		prev.handOver()
		return nil
	case p.release:
		prev.handOver()
		return nil
	}
	return &UniqueError{Index: p.def.Name, Value: p.entry.Value, Key: prev.entry.Doc, By: p.entry.Doc, pending: true}
}

// handOver marks a write of an entry another document of the request
// releases: it replaces the entry, whatever version it is at.
func (p *planned) handOver() {
	p.release = false
	p.action.Write.Cond = driver.IfMatch(driver.ETagAny)
	p.overwrite = true
}

// condition is p's action with its condition, as what the delivery knows
// of the entry says; false when there is nothing to send (the delete of
// an entry known missing).
func (p *planned) condition(known memo) (driver.Action, bool) {
	a := p.action
	etag, learnt := known.of(a.Key, p.entry.Doc)
	switch {
	case p.release && learnt && etag == "":
		return a, false
	case p.release:
		a.Delete = true
		a.Write = driver.Write{Cond: driver.IfMatch(driver.ETagAny)}
		if learnt {
			a.Write.Cond = driver.IfMatch(etag)
		}
	case !p.def.Unique:
		a.Write.Cond = driver.Cond{Kind: driver.CondNone} // one document's own entry
	case learnt && etag != "":
		a.Write.Cond = driver.IfMatch(etag) // a stale entry, or the document's own
	case learnt || !p.overwrite:
		a.Write.Cond = driver.Cond{Kind: driver.CondCreate}
	}
	return a, true
}

// refused learns why implied action i was refused (engine.Implier): the
// entry's state, read now. A value held by another document that holds
// it now ends the write with a *UniqueError; anything else is sent again.
func (x planner) refused(ctx context.Context, req engine.Request, implied []driver.Action, i int, err error, m any) (any, error) {
	known, _ := memoOf(m) // after a refusal, the send reads what it takes first (not predicted)
	if known == nil {
		known = memo{}
	}
	a := implied[i]
	if !errors.Is(err, driver.ErrExists) && !errors.Is(err, driver.ErrConflict) && !errors.Is(err, driver.ErrNotFound) {
		return known, err
	}
	it, rerr := x.lead.Backend.Read(ctx, a.Key)
	switch {
	case errors.Is(rerr, driver.ErrNotFound):
		known[a.Key] = learnt{dropped: a.Delete}
		return known, nil
	case rerr != nil:
		return known, rerr
	}
	held, derr := decode(it)
	known[a.Key] = learnt{etag: it.ETag, doc: held.Doc} // unreadable: taken as stale, replaced on its ETag
	if a.Delete || derr != nil {
		return known, nil
	}
	mine, _ := decode(driver.Item{Key: a.Key, Data: a.Write.Data})
	if held.Doc == mine.Doc {
		return known, nil
	}
	known[a.Key] = learnt{etag: it.ETag} // stale, unless held (below)
	if held.Index != mine.Index {
		return known, nil
	}
	if held.Value != mine.Value {
		return known, driver.Errorf(driver.ErrInvalidInput, "index %q: the values %q and %q share a hash", mine.Index, mine.Value, held.Value)
	}
	taker, err := x.of(mine.Doc)
	if err != nil || taker == nil {
		taker = x.lead
	}
	holds := false
	switch doc, err := x.lead.Backend.Read(ctx, held.Doc); {
	case errors.Is(err, driver.ErrNotFound):
	case err != nil:
		return known, err
	default:
		if holds, err = x.keeps(taker, held, doc.Data); err != nil {
			return known, err
		}
	}
	if holds {
		delete(known, a.Key) // held: never written over on this ETag
		return known, &UniqueError{Index: held.Index, Value: held.Value, Key: held.Doc, By: mine.Doc}
	}
	return known, nil // a stale entry: replaced on its ETag
}

// keeps reports whether data, e's document as stored, keeps e's value,
// as a write about to take the value must judge: by the Set of the
// document's own Store where the request writes it too, else by judge's
// (the taker's). A document in which that Set finds no value at all for
// the index is taken as keeping it: it may be of another type, whose
// Store shares the index's name (and its values), and only a document
// found holding another value, or missing, frees the value. (An entry an
// older writer left on a document it emptied is repaired by Reindex.)
func (x planner) keeps(judge *Set, e Entry, data []byte) (bool, error) {
	if s, err := x.of(e.Doc); err == nil && s != nil {
		judge = s
	}
	vals, err := judge.Values(e.Doc, data)
	if err != nil {
		return false, err
	}
	for i, d := range judge.Defs {
		if d.Name == e.Index {
			return i >= len(vals) || len(vals[i]) == 0 || slices.Contains(vals[i], e.Value), nil
		}
	}
	return true, nil // no index of that name here: nothing frees it
}

// holds reports whether e's document holds e's value now (an entry a
// writer that did not declare the index left is not trusted).
func (s *Set) holds(ctx context.Context, e Entry) (bool, error) {
	it, err := s.Backend.Read(ctx, e.Doc)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return s.Holds(e.Doc, it.Data, e.Index, e.Value)
}

// Holds reports whether data, a stored document of key, holds value in
// the index named idx.
func (s *Set) Holds(key string, data []byte, idx, value string) (bool, error) {
	vals, err := s.Values(key, data)
	if err != nil {
		return false, err
	}
	for i, d := range s.Defs {
		if d.Name == idx && i < len(vals) {
			return slices.Contains(vals[i], value), nil
		}
	}
	return false, nil
}
