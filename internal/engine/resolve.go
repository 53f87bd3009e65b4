package engine

import (
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/outcome"
)

// resolve decides what became of req from base, the versions of its keys
// read after its answer was lost, with outcome.Resolve, the one function
// that decides it. A request of several keys is applied all or nothing, so
// one key found committed proves the whole request committed, and one
// whose history went on without it proves none of it landed; one still at
// the version its write was conditioned on proves the request has not
// landed yet. A check (driver.Action.Check) tells nothing.
func resolve(req Request, base []Version) outcome.Verdict {
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
		if b := base[i]; b.Exists {
			o = outcome.Observed{Found: true, ETag: string(b.ETag), Meta: b.Meta}
		}
		verdicts[outcome.Resolve(sent, o)] = true
	}
	for _, v := range []outcome.Verdict{outcome.Committed, outcome.NotApplied, outcome.NotLanded} {
		if verdicts[v] {
			return v
		}
	}
	return outcome.Unknown
}

// ambiguous reports whether a write or delete that failed with err may
// nevertheless have been applied.
func ambiguous(err error) bool {
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
