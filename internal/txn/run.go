package txn

import (
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// A run of fn, and what its end makes of the attempt.

// fnRun is how one run of fn ended.
type fnRun struct {
	err      error
	panicked bool
	p        any   // the panic's value
	self     error // fn wrote one of the transaction's keys outside it (*reentry.SelfWriteError)
}

// runFn runs fn on h, inside the Reentry of in (a write fn makes outside
// tx, through that Store, of a key the transaction touches would beat
// every commit: it fails the transaction at once), unless in is nil: the
// Store leading the transaction, when known as the run starts.
func runFn(fn func(*Handle) error, h *Handle, in Store) (r fnRun) {
	call := func() error {
		r.panicked = true
		defer func() {
			if r.panicked {
				r.p = recover()
			}
		}()
		r.err = fn(h)
		r.panicked = false
		return nil
	}
	if in != nil {
		r.self = in.Reentry().RunAny(telemetry.OpTransact.String(), call, func() []string { return h.st.ownKeys() })
	} else {
		call()
	}
	return r
}

// outcome is what a run of fn that ended as r makes of the attempt, as
// the engine is told. A Store that could not join fails the attempt,
// whatever fn returned (err). An error matching ErrConflict runs fn again,
// within the policy (engine.Rerun). Any other error of fn is returned as
// is: it counts only when the reads fn saw were current together
// (failed). A panic of fn goes on up only when they were: they are
// checked first, and if one changed fn acted on a torn view and runs again
// (engine.ErrStale).
func (st *State) outcome(r fnRun, env *engine.Env) error {
	switch {
	case r.self != nil:
		return r.self
	case r.panicked:
		if errors.Is(st.revalidate(env, nil), engine.ErrStale) {
			return engine.ErrStale // a panic on a torn view: run again
		}
		panic(r.p)
	case st.err != nil:
		return st.err
	case errors.Is(r.err, driver.ErrConflict):
		return engine.Rerun(r.err)
	}
	return r.err
}

// failed is the attempt's end when fn returned err, an error of its own:
// err, once the reads fn made are found current together (engine.ErrStale
// when one changed: fn runs again). On a backend with PureChecks the
// engine sends their checks first, as it sends a commit
// (engine.Checked).
func (st *State) failed(err error) (engine.Request, error) {
	checks, stale := st.verify(nil)
	switch {
	case stale != nil:
		return nil, stale
	case len(checks) > 0:
		return checks, engine.Checked(err)
	}
	return nil, err
}
