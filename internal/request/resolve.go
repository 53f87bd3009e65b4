package request

import (
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
)

// Resolve decides what became of req from base, the versions of its keys
// read after its answer was lost, with outcome.Resolve, the one function
// that decides it. A request of several keys is applied all or nothing, so
// one key found committed proves the whole request committed, and one
// whose history went on without it proves none of it landed; one still at
// the version its write was conditioned on proves the request has not
// landed yet. A check (driver.Action.Check) tells nothing.
func Resolve(req Request, base []Version) outcome.Verdict {
	verdicts := [4]bool{}
	for i, w := range req {
		if w.Check {
			continue
		}
		sent := outcome.Sent{Delete: w.Delete, Meta: w.Meta}
		if w.Write.Cond.Kind == driver.CondIfMatch {
			sent.IfMatch = string(w.Write.Cond.ETag)
		}
		var o outcome.Observed
		if b := base[i]; b.Stored() {
			o = outcome.Observed{Found: true, ETag: string(b.ETag), Meta: b.Meta}
		}
		verdicts[outcome.Resolve(sent, o)] = true
	}
	switch {
	case verdicts[outcome.Committed]:
		return outcome.Committed
	case verdicts[outcome.NotApplied]:
		return outcome.NotApplied
	case verdicts[outcome.NotLanded] && !landable(req, base):
		// Not landed (a key still holds the version it was conditioned
		// on), but another action's condition no longer holds: sent again
		// it would be refused on every try, as the lost one would be. It
		// can never land: built again, as after a lost race.
		return outcome.NotApplied
	case verdicts[outcome.NotLanded]:
		return outcome.NotLanded
	}
	return outcome.Unknown
}

// landable reports whether every condition of req, checks included, still
// holds in base: the versions it names are current, and the keys it
// creates are missing.
func landable(req Request, base []Version) bool {
	for i, w := range req {
		switch b, c := base[i], w.Write.Cond; c.Kind {
		case driver.CondIfMatch:
			if c.ETag != driver.ETagAny && (!b.Stored() || b.ETag != c.ETag) {
				return false
			}
		case driver.CondCreate:
			if b.Stored() {
				return false
			}
		}
	}
	return true
}

// Ambiguous reports whether a write or delete that failed with err may
// nevertheless have been applied.
func Ambiguous(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, driver.ErrAmbiguous):
		return true
	case errors.Is(err, driver.ErrNotApplied):
		return false
	}
	return driver.SentinelOf(err) == nil // transport failure, timeout, cancellation, 5xx
}

// FoundIn is what req, found committed in base, made of each key: the
// version read where it is req's own, otherwise (later writes followed
// it) a superseded ETag naming the write, and no document.
func FoundIn(req Request, base []Version) []driver.Item {
	out := make([]driver.Item, len(req))
	for i, w := range req {
		out[i] = driver.Item{Key: w.Key}
		switch {
		case w.Delete:
		case base[i].Exists && base[i].Meta.LastID() == w.Meta.LastID() && w.Meta.IDs != "":
			out[i] = base[i].Item
		default:
			out[i].ETag = Superseded(w.Meta, -1)
		}
	}
	return out
}

// Refused is the write of req that err, its refusal, names: the action a
// Commit's *driver.ActionError points at, otherwise the first.
func Refused(req Request, err error) KeyWrite {
	var ae *driver.ActionError
	if errors.As(err, &ae) && ae.Index >= 0 && ae.Index < len(req) {
		return req[ae.Index]
	}
	return req[0]
}

// JoinLine is errors.Join(a, b) on one line: a lost answer's cause and
// what ended the write after it, both matched by errors.Is, said once
// each ("; " between them, and once when they read alike).
func JoinLine(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return joined{a, b}
}

type joined [2]error

func (j joined) Error() string {
	if j[0].Error() == j[1].Error() {
		return j[0].Error()
	}
	return j[0].Error() + "; " + j[1].Error()
}

func (j joined) Unwrap() []error { return j[:] }
