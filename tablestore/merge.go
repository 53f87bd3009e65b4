package tablestore

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/members"
)

// Merges and batches are writes of the Store's one delivery engine: this
// package builds them (properties, actions) and hands them to the Store
// (package internal/access), which checks, sends, retries, fences and
// resolves them as it does its own writes, and records their spans. The
// backend's part is the Table operations themselves: Write with
// driver.ModeMerge (Merge Entity, Insert or Merge Entity) and Commit (an
// entity group transaction), declared in Abilities.
//
// Bookkeeping (write ids, lineage, fencing token; see internal/meta):
//
//   - a write that starts a new history (batch Create, Replace, Upsert)
//     stores a new one with a write id of its own, as Store.Create, Replace
//     and Upsert do;
//   - a write conditioned on a version it read (Merge, and the actions of a
//     fenced batch) extends that version's bookkeeping with a new write id
//     and the higher fencing token;
//   - a merge that did not read (batch Merge and UpsertMerge, UpsertMerge)
//     sends no bookkeeping at all: Merge Entity leaves properties it does
//     not name alone, so the stored ids, lineage and token are kept.

// Merge writes only the named fields of d.Value (every field of T if none
// are named) into the stored entity if its ETag is still d.ETag (Merge
// Entity); fields not named, and properties T does not know, keep their
// stored values. A field split across properties (see EntityCodec) is
// written whole: its count and every part, and no stale part stays. It
// returns the entity's new ETag.
//
// A Store on another backend than a table matches errors.ErrUnsupported,
// and nothing is sent (so do UpsertMerge and a Batch's Submit).
//
// Merge reads the entity first and sends the merge with If-Match of the
// version read, carrying that version's bookkeeping extended by a write id
// of its own (write ids, lineage and fencing token are kept). It is a
// read-modify-write as Store.Update is: only the named properties whose
// values differ from the version read are sent, and a named field whose
// value is no property (a zero time, a nil []byte, an empty GUID) is
// removed, which Merge Entity cannot say, so the whole entity is written
// then (see "Writes send what changed" in docs/tables.md). So:
//
//   - An empty d.ETag matches etagstore.ErrETagRequired and nothing is sent;
//     a stale ETag returns a *etagstore.ConflictError[T]; a missing entity
//     matches etagstore.ErrNotFound.
//   - ETagAny merges into whatever version is stored: a version that
//     changes between the read and the merge is read again and merged into.
//   - A fenced context (etagstore.WithFence) is checked against the version
//     read, atomically (the merge is conditioned on that version): a higher
//     stored token matches etagstore.ErrFenced; the token is recorded.
//   - A merge whose answer was lost is resolved by reading, like a Store
//     write: found committed, it succeeds (with a superseded ETag, see
//     etagstore.Doc, when later writes followed it); not landed, it is sent again; where no read can
//     tell, the error is an *etagstore.OutcomeUnknownError.
func Merge[T any](ctx context.Context, s *etagstore.Store[T], d etagstore.Doc[T], properties ...string) (etagstore.ETag, error) {
	if _, err := tableOf(s, "Merge"); err != nil {
		return "", err
	}
	act := access.Action[T]{Kind: access.Merge, Key: d.Key, ETag: d.ETag, Mine: d.Value, Encode: encodeProperties(s, d.Value, properties, true)}
	if fields := fieldsOf[T](s); fields != nil {
		act.Encode = func() ([]byte, error) {
			data, err := s.Codec().(EntityCodec).marshal(d.Value, false)
			if err != nil {
				return nil, err
			}
			return selectFields(data, properties, fields)
		}
		act.Overlay = func(base, data []byte) ([]byte, error) { return overlay(base, data, properties, fields) }
	}
	etags, err := s.DeliverWrite(ctx, access.Write[T]{Actions: []access.Action[T]{act}})
	if err != nil {
		return "", err
	}
	return etags[0], nil
}

// UpsertMerge writes the named properties of v (every property v has if
// none are named) under key with no concurrency check (Insert or Merge
// Entity): the documented bypass, like Store.Upsert. On a missing key it
// inserts those properties alone, so a key inserted with names holds only
// the named fields. It sends no bookkeeping, so the stored write ids,
// lineage and fencing token are kept (an inserted entity has none).
//
// UpsertMerge reads nothing, and Merge Entity cannot remove a property: a
// field of v whose value is no property (a zero time, a nil []byte, an
// empty GUID) keeps its stored value when none are named, and naming one
// matches etagstore.ErrInvalidInput; a split field whose new value has
// fewer parts leaves the stored parts beyond them, which no read uses;
// writes that read first keep them too (to them they are properties T
// does not write), until a whole write (Upsert, or Replace of a Doc built
// by hand) rewrites the entity. Clear a field with Update or Merge.
//
// A fenced context (etagstore.WithFence) matches etagstore.ErrInvalidInput
// and nothing is sent: UpsertMerge checks nothing and cannot honour a
// fencing token (use Merge). Carrying no write id, a merge whose answer was
// lost cannot be told apart from a later writer's: it is an
// *etagstore.OutcomeUnknownError.
func UpsertMerge[T any](ctx context.Context, s *etagstore.Store[T], key string, v T, properties ...string) (etagstore.ETag, error) {
	if _, err := tableOf(s, "UpsertMerge"); err != nil {
		return "", err
	}
	etags, err := s.DeliverWrite(ctx, access.Write[T]{Actions: []access.Action[T]{
		{Kind: access.UpsertMerge, Key: key, Mine: v, Encode: encodeProperties(s, v, properties, true)},
	}})
	if err != nil {
		return "", err
	}
	return etags[0], nil
}

// encodeProperties returns the encoder of the named properties of v (all
// of them if none are named) with s's codec; merge says it is a merge's.
func encodeProperties[T any](s *etagstore.Store[T], v T, properties []string, merge bool) func() ([]byte, error) {
	return func() ([]byte, error) {
		marshal := s.Codec().Marshal
		if c, ok := s.Codec().(EntityCodec); ok && merge {
			// A merge writes the properties it names (all of T's when it
			// names none), empty ones too: omitempty leaves them out of
			// whole writes only.
			marshal = func(v any) ([]byte, error) { return c.marshal(v, false) }
		}
		data, err := marshal(v)
		if err != nil {
			return nil, err
		}
		return selectProperties(data, properties)
	}
}

// fieldsOf is the names of the fields of s's T, when s encodes with
// EntityCodec (nil otherwise).
func fieldsOf[T any](s *etagstore.Store[T]) map[string]bool {
	if _, ok := s.Codec().(EntityCodec); !ok {
		return nil
	}
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p, err := planFor(t)
	if err != nil {
		return nil
	}
	fields := make(map[string]bool, len(p.fields))
	for _, f := range p.fields {
		fields[f.name] = true
	}
	return fields
}

// selectFields is selectProperties for a Merge, which reads first: a named
// field of T whose value is no property (a zero time, a nil []byte, an
// empty GUID) is named all the same, and the merge removes it (overlay).
func selectFields(data []byte, names []string, fields map[string]bool) ([]byte, error) {
	if len(names) == 0 {
		return data, nil // every field: the overlay removes those data holds no property of
	}
	for _, n := range names {
		if !fields[n] {
			return nil, fmt.Errorf("%w: tablestore: the document type has no field %q", etagstore.ErrInvalidInput, n)
		}
	}
	present := make([]string, 0, len(names))
	_ = eachMember(data, func(name, _, _ []byte) bool {
		if f := fieldOf(name); slices.Contains(names, f) && !slices.Contains(present, f) {
			present = append(present, f)
		}
		return true
	})
	if len(present) == 0 {
		return []byte("{}"), nil // every field named is cleared (selectProperties of none would be all)
	}
	return selectProperties(data, present)
}

// overlay is what a Merge of the named fields (all of T's when none are
// named) makes of base, T's encoding of the version read: base without
// those fields' properties (their parts and annotations included), then
// data's, which hold the fields' new values.
func overlay(base, data []byte, names []string, fields map[string]bool) ([]byte, error) {
	out := []byte{'{'}
	err := eachMember(base, func(name, _, member []byte) bool {
		if f := fieldOf(name); len(names) == 0 && fields[f] || slices.Contains(names, f) {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, member...)
		return true
	})
	if err != nil {
		return nil, err
	}
	out = append(out, '}')
	return members.Add(out, bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(data), []byte("{")), []byte("}"))), nil
}

// fieldOf is the field a property (or its annotation, or a part) is of.
func fieldOf(name []byte) string {
	base, _, _ := bytes.Cut(name, []byte("@"))
	if field, _, ok := partOf(base); ok {
		base = field
	}
	return string(base)
}

// selectProperties keeps only the named properties of an
// entity-properties object, with their type annotations and, for a field
// split across properties, its parts (see EntityCodec); no names keeps
// all. A merge of a split field writes its count and every part, so
// readers never join parts of an older value.
func selectProperties(data []byte, names []string) ([]byte, error) {
	if len(names) == 0 {
		return data, nil
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = false
	}
	out := append(make([]byte, 0, len(data)), '{')
	err := eachMember(data, func(name, _, member []byte) bool {
		base, _, _ := bytes.Cut(name, []byte("@"))
		if field, _, ok := partOf(base); ok {
			base = field
		}
		if _, ok := want[string(base)]; ok {
			want[string(base)] = true
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, member...)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("tablestore: entity is not a JSON object: %w", err)
	}
	for _, n := range names {
		if !want[n] {
			return nil, fmt.Errorf("%w: tablestore: no property %q in the document (a field that does not exist, or one whose value is no property: a zero time, a nil []byte, an empty GUID; a merge that reads nothing cannot remove a property, so clear one with Update or Merge, which do)", etagstore.ErrInvalidInput, n)
		}
	}
	return append(out, '}'), nil
}
