package index

import (
	"context"
	"errors"
	"iter"
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// This file reads entries by value: a value carries its scope as keys do
// ("b1/ship it" on a table without Options.Partition: partition b1).

// split is scoped's scope and its value after it.
func (s *Set) split(scoped string) (scope, value string, err error) {
	if s.space == nil {
		return "", "", s.Usable()
	}
	if scope, err = s.space.Scope(scoped); err != nil {
		return "", "", err
	}
	return scope, strings.TrimPrefix(scoped, scope), nil
}

// Holder reads the entry of scoped in unique index d: the document
// holding the value, as the entry says (ErrNotFound: none). The caller
// checks that the document still holds it.
func (s *Set) Holder(ctx context.Context, d Def, scoped string) (Entry, error) {
	scope, value, err := s.split(scoped)
	if err != nil {
		return Entry{}, err
	}
	it, err := s.Backend.Read(ctx, s.space.Key(scope, uniqueName(d.Name, value)))
	if errors.Is(err, driver.ErrNotFound) && !errors.Is(err, driver.ErrStorageNotFound) {
		// Named by the value, not by the entry's reserved key.
		return Entry{}, driver.Errorf(driver.ErrNotFound, "no document holds %q in index %q", scoped, d.Name)
	}
	if err != nil {
		return Entry{}, err
	}
	e, err := decode(it)
	if err != nil || e.Value != value || e.Index != d.Name {
		return Entry{}, driver.Errorf(driver.ErrNotFound, "no document holds %q in index %q", scoped, d.Name)
	}
	return e, nil
}

// Holders yields the entries of scoped in lookup index d, in the
// backend's order of their keys; the caller checks each document.
func (s *Set) Holders(ctx context.Context, d Def, scoped string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		scope, value, err := s.split(scoped)
		if err != nil {
			yield(Entry{}, err)
			return
		}
		for it, err := range s.Backend.List(ctx, s.space.Key(scope, lookupPrefix(d.Name, value))) {
			if err != nil {
				yield(Entry{}, err)
				return
			}
			e, derr := decode(it)
			if derr != nil || e.Value != value || e.Index != d.Name {
				continue // another value sharing a hash, or unreadable: not this value's
			}
			if !yield(e, nil) {
				return
			}
		}
	}
}

// ByScope groups entries, as a listing across scopes yields them (by
// scope: driver.Entries.Range), into runs of one scope each, of at most
// max entries (0: no bound), yielded with their scope. An entry whose
// scope space cannot name is left out. A listing's error is yielded
// once, with no run, and ends the sequence.
func ByScope(entries iter.Seq2[driver.Item, error], space *driver.Entries, max int) iter.Seq2[Run, error] {
	return func(yield func(Run, error) bool) {
		var r Run
		for it, err := range entries {
			if err != nil {
				yield(Run{}, err)
				return
			}
			sc, err := space.Scope(it.Key)
			if err != nil {
				continue
			}
			if len(r.Items) > 0 && (sc != r.Scope || len(r.Items) == max) {
				if !yield(r, nil) {
					return
				}
				r = Run{}
			}
			r.Scope = sc
			r.Items = append(r.Items, it)
		}
		if len(r.Items) > 0 {
			yield(r, nil)
		}
	}
}

// Run is entries of one scope (ByScope).
type Run struct {
	Scope string
	Items []driver.Item
}
