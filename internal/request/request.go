// Package request is what one attempt of a write sends: a request of key
// writes (a write, delete or check each, with its bookkeeping), the
// versions they are built over, what a lost answer to it means (Resolve:
// all or nothing over its keys, from package outcome's verdict on each),
// and the error a delivery ends with (End). It is pure: the delivery
// engine sends requests and reads versions; this package only describes
// them.
package request

import (
	"errors"
	"fmt"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
)

// Version is a version of a key an attempt starts from.
type Version struct {
	driver.Item
	Meta      meta.Meta // Item.Meta parsed
	Exists    bool
	Verified  bool  // read during this call: current at some instant of it
	MetaKnown bool  // false for a caller's Doc, whose bookkeeping is not at hand
	Missing   error // why it does not exist, when read so (matches ErrNotFound)

	// What the caller knows of the item, for its plan; the engine never
	// looks at it.
	Canonical bool // Data is exactly what the caller's codec makes of its value
}

// Stored reports whether the key holds a version: one that exists, or
// one its Store reads as missing because it has expired (Missing set,
// ETag and Data kept), which a write replaces on its ETag.
func (v Version) Stored() bool { return v.Exists || v.ETag != "" }

// KeyWrite is one key's part of a request: a write, delete or check as
// sent, with the bookkeeping its Write.Meta holds (its last id is this
// write's).
type KeyWrite struct {
	driver.Action
	Meta meta.Meta
	// Unread: a create of a key its writer did not read (Tx.Create): a
	// refusal of it because the key exists ends the write as it is, a
	// fact of the key rather than a lost race.
	Unread bool
	// Was is the stored version the write replaces or deletes (no Data
	// when the key was missing), when WasKnown: what an Implier compares
	// the write with (internal/imply). Replacing records it.
	Was      driver.Item
	WasKnown bool
}

// Replacing is w, recorded as the write that replaces or deletes b
// (KeyWrite.Was).
func (w KeyWrite) Replacing(b Version) KeyWrite {
	w.Was, w.WasKnown = b.Item, true
	if !b.Stored() {
		w.Was = driver.Item{Key: b.Key}
	}
	return w
}

// Request is what one attempt sends: one key's write, or several that the
// backend applies atomically (Env.Commit).
type Request []KeyWrite

// Verified reports whether every version of vs was read during the call.
func Verified(vs []Version) bool {
	for _, v := range vs {
		if !v.Verified {
			return false
		}
	}
	return true
}

// CheckFence refuses a write carrying token over a version whose
// bookkeeping records a higher one (ErrFenced).
func CheckFence(key string, stored meta.Meta, token int64) error {
	if stored.Fence > token {
		return fmt.Errorf("%w: %q carries fencing token %d, the write only %d", driver.ErrFenced, key, stored.Fence, token)
	}
	return nil
}

// ErrStale is what a SelfReading plan reports when a version it read
// changed before it could send: the engine builds it again after a pause,
// as after a lost race. Out of time, the write fails with an error
// matching driver.ErrConflict: the plan's own (see Rerun) or one made of
// ErrStale's text.
var ErrStale = errors.New("a document read has changed")

// Rerun is err, an error of a SelfReading plan that asks to be built again
// (a transaction function's ErrConflict), marked so that it matches
// ErrStale; out of time, err is what the write fails with.
func Rerun(err error) error { return rerun{err} }

type rerun struct{ error }

func (e rerun) Unwrap() error        { return e.error }
func (e rerun) Is(target error) bool { return target == ErrStale }

// Checked is what a SelfReading plan returns, with a request of checks
// only (Check), when the write ends with err provided the versions the
// plan read are still current (a transaction's error made on its reads):
// the delivery sends the checks as it sends any request that writes
// nothing (send.go) and, once they hold, ends with err; a check that
// fails runs the plan again, as ErrStale does.
func Checked(err error) error { return checked{err} }

type checked struct{ error }

func (c checked) Unwrap() error { return c.error }

// CheckedEnd is the error a Checked err ends the write with once its
// checks hold.
func CheckedEnd(err error) (end error, ok bool) {
	var after checked // a variable errors.As takes escapes: only a failing Build pays for it
	if errors.As(err, &after) {
		return after.error, true
	}
	return nil, false
}
