package etagstore

import (
	"fmt"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore/internal/fieldmerge"
)

// ConflictError reports a write that lost to another writer (HTTP 412). It
// matches errors.Is(err, ErrConflict) and carries everything needed to show
// an end user what happened without losing their work.
type ConflictError[T any] struct {
	Key string
	// ETag is the version the caller held when its write was refused.
	ETag ETag
	// Base is the version the caller started editing from (Save only;
	// otherwise the zero T).
	Base T
	// Mine is what the caller tried to write (the zero T for Delete).
	Mine T
	// Theirs is the document stored now, with its current ETag.
	Theirs Doc[T]
	// Fields lists the field paths changed on both sides to different
	// values (Save with a field-level merge); empty otherwise.
	Fields []string
	// Attempts is how many writes were tried.
	Attempts int
}

// Error describes the conflict in one line.
func (e *ConflictError[T]) Error() string {
	msg := fmt.Sprintf("etagstore: conflict on %q: held ETag %s, current %s, after %d attempt(s)",
		e.Key, e.ETag, e.Theirs.ETag, e.Attempts)
	if len(e.Fields) > 0 {
		msg += "; both sides changed " + strings.Join(e.Fields, ", ")
	}
	return msg
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError[T]) Is(target error) bool { return target == ErrConflict }

// Diff shows how Mine differs from Theirs, one line per change, in go-cmp's
// format: lines starting with "-" are theirs (stored), "+" are mine. It is
// empty when they are equal.
func (e *ConflictError[T]) Diff() string {
	d := cmp.Diff(e.Theirs.Value, e.Mine, fieldmerge.ExportAll)
	if d == "" {
		return ""
	}
	return "(-theirs +mine)\n" + d
}
