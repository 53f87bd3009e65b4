package etagstore

// Save, the wiki-style write, and MergeFields, its default three-way merge.

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/fieldmerge"
	"github.com/etagstore/etagstore/internal/reentry"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// MergeFunc combines two edits of base: mine (the caller's) and theirs (the
// stored version). It returns the merged value, or an error matching
// ErrConflict (such as a *MergeError) when the edits overlap.
type MergeFunc[T any] func(base, mine, theirs T) (T, error)

// MergeError is returned by a MergeFunc whose inputs changed the same
// fields to different values. It matches ErrConflict.
type MergeError struct {
	Fields []string // paths such as "Body" or "Meta.Title"
}

func (e *MergeError) Error() string {
	return "etagstore: both sides changed " + strings.Join(e.Fields, ", ")
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *MergeError) Is(target error) bool { return target == ErrConflict }

// Save writes edited, the caller's edit of base, the way a wiki saves a page:
// if base.ETag is still current it is a plain If-Match write; otherwise it
// reads the stored version (theirs), calls merge(base.Value, edited, theirs)
// and writes the result with If-Match of theirs, retrying per the
// RetryPolicy. A nil merge means MergeFields. An edit that changes nothing
// writes nothing, but Save still confirms by a read that the document is
// there and returns its current version.
//
// Overlapping edits (merge returned an error) give a *ConflictError[T]
// holding Base, Mine (edited), Theirs and the Fields that overlap; nothing is
// written. An empty base.ETag matches ErrETagRequired; a deleted document
// ErrNotFound; a merge error that does not match ErrConflict is returned as
// is; a lost answer no read can settle, an *OutcomeUnknownError. A merge
// that writes base.Key itself, through this Store, fails at once with
// ErrInvalidInput (its write stays, landed once), as Update's mutate does.
func (s *Store[T]) Save(ctx context.Context, base Doc[T], edited T, merge MergeFunc[T]) (Doc[T], error) {
	ctx, sp := s.core.Obs.Begin(ctx, telemetry.OpSave, base.Key)
	defer sp.EndOnPanic()
	d, err := s.save(ctx, base, edited, merge, &sp.Stats)
	sp.End(err)
	return d, err
}

func (s *Store[T]) save(ctx context.Context, base Doc[T], edited T, merge MergeFunc[T], st *telemetry.Stats) (Doc[T], error) {
	if err := s.core.CheckKey(base.Key); err != nil {
		return Doc[T]{}, err
	}
	if base.ETag == "" {
		return Doc[T]{}, errorf(ErrETagRequired, "Save %q", base.Key)
	}
	if merge == nil {
		merge = MergeFields[T]
	}
	var mine T
	reads := 0
	apply := func(b version) ([]byte, []byte, bool, error) {
		reads++
		theirs, baseline, err := s.enc.StartFrom(b)
		if err != nil {
			return nil, nil, false, err
		}
		mine = edited
		if b.ETag != base.ETag {
			err = s.core.Reentry.Run(telemetry.OpSave.String(), base.Key, func() (err error) {
				mine, err = merge(base.Value, edited, *theirs)
				return err
			})
			var self *reentry.SelfWriteError
			if errors.As(err, &self) {
				return nil, nil, false, err // merge wrote base.Key itself: no retry can win
			}
			if err != nil {
				return nil, nil, false, s.mergeConflict(base, edited, Doc[T]{Key: b.Key, Value: *theirs, ETag: b.ETag}, reads-1, err)
			}
		}
		data, err := s.enc.Encode(base.Key, mine)
		return data, baseline, !bytes.Equal(data, baseline), err
	}
	// The first attempt writes on base itself when base carries its
	// version's bookkeeping (a Doc a read returned), or on the cached copy
	// of that version; otherwise it reads first: a write continues the
	// stored bookkeeping (write ids, fencing token).
	start := s.core.Cached(ctx, base.Key, base.ETag)
	if start == nil && base.Extra.x.Meta != "" {
		data, canonical := []byte(base.Extra.x.Doc), false // the document base was read from
		if base.Extra.x.Doc == "" || base.Extra.x.ETag != base.ETag {
			var err error
			if data, err = s.enc.Encode(base.Key, base.Value); err != nil {
				return Doc[T]{}, err
			}
			canonical = true
		}
		it := driver.Item{Key: base.Key, Data: data, Meta: base.Extra.x.Meta, ETag: base.ETag}
		start = []version{s.core.Stored(it, false, canonical)}
	}
	res, extra, err := s.modify(ctx, telemetry.OpSave, base.Key, false, start, &mine, apply, nil)
	st.Attempts = res.Attempts
	var ce *ConflictError[T]
	if errors.As(err, &ce) {
		ce.Base = base.Value
	}
	if err != nil {
		return Doc[T]{}, err
	}
	return s.dated(Doc[T]{Key: base.Key, Value: mine, ETag: res.Out[0].ETag, Extra: extra}), nil
}

// mergeConflict turns a merge error into Save's error: a *ConflictError
// when the edits overlap, the error as is otherwise.
func (s *Store[T]) mergeConflict(base Doc[T], edited T, theirs Doc[T], attempts int, err error) error {
	if !errors.Is(err, ErrConflict) {
		return err
	}
	ce := &ConflictError[T]{Key: base.Key, ETag: base.ETag, Base: base.Value, Mine: edited, Theirs: theirs, Attempts: attempts}
	var me *MergeError
	if errors.As(err, &me) {
		ce.Fields = me.Fields
	}
	return ce
}

// MergeFields is the default three-way merge: field by field, recursing into
// nested structs, a field changed on one side only takes that side's value;
// a field changed on both sides to the same value keeps it; a field changed
// on both sides to different values is a conflict, reported as a
// *MergeError naming every such field path. Values that are not structs
// (slices, maps, pointers) and structs with unexported fields (time.Time)
// are compared whole.
func MergeFields[T any](base, mine, theirs T) (T, error) {
	out, paths := fieldmerge.Merge(base, mine, theirs)
	if len(paths) > 0 {
		return out, &MergeError{Fields: paths}
	}
	return out, nil
}
