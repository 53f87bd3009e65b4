package index

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// This file checks a Reindex's entries against their documents: those of
// a page's documents that changed while the page's entries were written
// (recheck), and, at the end, every entry of a scope that held entries
// before the pass wrote any (Repair). An entry whose document does not
// hold its value now is deleted, on the entry's version, so that a writer
// that took it meanwhile keeps it.

// recheck lists docs' page again, the keys after from and up to through:
// for a document that changed or went since it was read, each of d's
// entries naming it is checked against what it holds now (Repair's rule).
func (s *Set) recheck(ctx context.Context, d Def, docs []driver.Item, from, through string) error {
	now, err := s.relist(ctx, from, through)
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

// relist lists the documents after from and up to through again, with
// their keys and ETags alone where the backend can (VersionsBetween),
// else whole, page by page.
func (s *Set) relist(ctx context.Context, from, through string) ([]driver.Item, error) {
	a := s.Backend.Abilities()
	if between := a.VersionsBetween; between != nil {
		return between(ctx, from, through)
	}
	order := a.KeyOrder()
	var out []driver.Item
	for {
		items, more, err := s.Backend.ListPage(ctx, "", from, ReindexPage)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if order(it.Key, through) > 0 {
				return out, nil
			}
			out = append(out, it)
		}
		if !more || len(items) == 0 {
			return out, nil
		}
		from = items[len(items)-1].Key
	}
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
		err := s.resend(ctx, []driver.Action{{Key: it.Key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(it.ETag)}}})
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
