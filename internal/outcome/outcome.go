// Package outcome decides what happened to a write whose response was
// lost. It is the one place that decision is made: every write path of the
// Store (Create, Replace, Upsert, Delete, Update, Save and group commit)
// and every backend that writes on its own (table merges and batches)
// describes the request it sent as a Sent and, when the answer is lost,
// reads the key and asks Resolve.
//
// A conditional write whose response is lost may have committed. The read
// that follows either proves what happened — the write's id or lineage is
// in the stored bookkeeping (Committed), the version it was conditioned on
// is still there (NotLanded: the same request may be sent again, and at
// most one of the two can match), the history it continued went on without
// it (NotApplied) — or proves nothing, and the outcome is Unknown. Nothing
// is guessed, and a write is sent again only when a read proves the earlier
// try has not landed.
package outcome

import "github.com/etagstore/etagstore/internal/meta"

// Sent is a write or delete as sent.
type Sent struct {
	Delete bool
	// IfMatch is the ETag the request was conditioned on ("*" for any
	// version), or empty for a create or an unconditional write.
	IfMatch string
	// Meta is the bookkeeping the write stored (its last id is the
	// write's own); empty for a delete.
	Meta meta.Meta
}

// Observed is what a read made after the lost answer found.
type Observed struct {
	Found bool
	ETag  string
	Meta  meta.Meta
}

// Verdict is what a read says of a write whose response was lost.
type Verdict uint8

const (
	// Unknown: the read cannot tell; the write may have landed and been
	// overwritten or deleted since.
	Unknown Verdict = iota
	// Committed: the write landed (its id, or the lineage it started, is
	// stored).
	Committed
	// NotLanded: the version the write was conditioned on is still
	// current, so it has not landed yet; sending the same request again is
	// safe (at most one of the two can match).
	NotLanded
	// NotApplied: the history the write continued went on without it; it
	// can never land. The read is the current version.
	NotApplied
)

func (v Verdict) String() string {
	return [...]string{"unknown", "committed", "not landed", "not applied"}[v]
}

// Resolve decides what became of s from o, a read made after s's response
// was lost. It is a pure function of the two.
func Resolve(s Sent, o Observed) Verdict {
	if !s.Delete && o.Found && s.Meta.LandedIn(o.Meta) {
		return Committed
	}
	switch {
	case !o.Found:
		// A delete may have been this one or another; a write may have
		// landed and been deleted since.
		return Unknown
	case s.IfMatch != "" && s.IfMatch != "*" && o.ETag == s.IfMatch:
		return NotLanded
	case s.Delete || s.Meta.Seq <= 1 || o.Meta.Lineage != s.Meta.Lineage:
		// A write that started a history (or a delete) is not found, and
		// another history is stored: it never landed, or it did and the
		// history was cut (replace, upsert, delete) after it.
		return Unknown
	case o.Meta.Seq < s.Meta.Seq || o.Meta.Covers(s.Meta.Seq):
		// The same history, and s's slot in it is either not reached
		// (the version s was conditioned on changed without a new write:
		// a merge) or in the stored window holding another id.
		return NotApplied
	}
	return Unknown // s's slot has left the window the document holds
}
