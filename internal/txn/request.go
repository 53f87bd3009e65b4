package txn

import (
	"errors"
	"slices"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/fence"
	"github.com/etagstore/etagstore/internal/index"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// A run's commit: the request it sends, the checks of its reads, and
// what the commit made.

// request is the commit: every key touched, in order — its write, or a
// check of the version read. A transaction that writes nothing has
// nothing to write: its reads are checked instead (verify), by a request
// of checks alone, which the engine sends, or by reading them again.
// CheckCommit is the batch's, once per request (batch.go), or here.
func (st *State) request(d *engine.Delivery, checked bool) (engine.Request, error) {
	_, fenced := fence.From(st.ctx)
	req := make(engine.Request, 0, len(st.order))
	writes := 0
	for _, tc := range st.order {
		if fenced && tc.view.wasRead(tc.key) {
			if err := engine.CheckFence(tc.key, tc.view.reads[tc.key].Meta, d.Fence()); err != nil {
				return nil, err
			}
		}
		w, written := tc.view.action(d, tc.key)
		if written {
			writes++
		}
		req = append(req, w)
	}
	if writes == 0 {
		return st.verify(nil)
	}
	if chk := st.lead.Abilities().CheckCommit; chk != nil && !checked {
		if err := chk(req.Actions()); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// verify checks that every version read of the keys in only (nil: all)
// is still current. On a backend with PureChecks it returns the request
// that checks them, which writes nothing: sent, it holds only if all are
// current at that instant, absences included. Otherwise it reads every
// key again now (engine.ErrStale when one changed): a document whose ETag
// did not change was current throughout, but a key missing at both reads
// may have existed between them.
func (st *State) verify(only map[string]bool) (engine.Request, error) {
	var read []touch
	for _, tc := range st.order {
		if tc.view.wasRead(tc.key) && (only == nil || only[tc.key]) {
			read = append(read, tc)
		}
	}
	if len(read) == 0 {
		return nil, nil
	}
	if st.lead.Abilities().PureChecks {
		checks := make(engine.Request, len(read))
		for i, tc := range read {
			checks[i] = engine.Check(tc.view.reads[tc.key])
		}
		return checks, nil
	}
	for _, tc := range read {
		it, err := tc.view.s.Backend().Read(st.ctx, tc.key)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			return nil, err
		}
		if b := tc.view.reads[tc.key]; b.Stored() != (err == nil) || b.ETag != it.ETag {
			return nil, engine.ErrStale
		}
	}
	return nil, nil
}

// revalidate checks now that every read of the keys in only (nil: all)
// is still current (engine.ErrStale when one is not): outside the
// transaction's own delivery (a panic of fn, a batch member's fn that
// wrote nothing, a Create refused). The checks of a backend with
// PureChecks go through the engine as a write of their own: sent again
// after a lost or throttled answer (they write nothing), within the
// policy, whose attempts count on from the transaction's.
func (st *State) revalidate(env *engine.Env, only map[string]bool) error {
	if st.lead == nil {
		return nil // nothing read
	}
	checks, err := st.verify(only)
	if err != nil || len(checks) == 0 {
		return err
	}
	keys := make([]string, len(checks))
	for i, c := range checks {
		keys[i] = c.Key
	}
	send := engine.PlanFunc(func(*engine.Delivery, []Version) (engine.Request, error) { return checks, nil })
	_, err = engine.New(env, telemetry.OpTransact.String(), engine.Blind, keys, send,
		engine.Options{Made: max(st.attempt-1, 0)}).Run(st.ctx)
	if errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrExists) || errors.Is(err, driver.ErrNotFound) {
		return engine.ErrStale
	}
	return err
}

// touchedBefore is the keys the run touched before it first touched key:
// the reads a write of key may have followed.
func (st *State) touchedBefore(key string) map[string]bool {
	only := map[string]bool{}
	for _, k := range st.ownKeys() {
		if k == key {
			break
		}
		only[k] = true
	}
	return only
}

// heldOnStale reports, for err a unique value held by a stored document
// (an *index.UniqueError of the run's write of its By), whether the reads
// the write followed have changed since (engine.ErrStale: the run, on
// current reads, may take another value), as revalidate checks them; nil
// when they are current or err is no such error.
func (st *State) heldOnStale(env *engine.Env, err error) error {
	var ue *index.UniqueError
	if !errors.As(err, &ue) || ue.Pending() {
		return nil
	}
	return st.revalidate(env, st.touchedBefore(ue.By))
}

// unreadRefused is the key of an unread Create (the root's Tx.Create)
// whose commit err refused because the key exists ("" when err is no such
// refusal).
func (st *State) unreadRefused(err error) string {
	var ae *driver.ActionError
	if !errors.Is(err, driver.ErrExists) || errors.As(err, new(*index.UniqueError)) {
		return "" // a unique value held: the key may well be missing
	}
	i := 0
	if errors.As(err, &ae) {
		i = ae.Index
	}
	if i < 0 || i >= len(st.order) {
		return ""
	}
	if _, ok := st.order[i].view.unreadCreate(st.order[i].key); !ok {
		return ""
	}
	return st.order[i].key
}

// readBefore is the keys fn had touched when it created key unread (in a
// batch, of its own): the reads its Create may depend on. A refusal of the
// Create (ErrExists) is fn's answer once they are found current; what fn
// read after it could not have changed it.
func (st *State) readBefore(key string) map[string]bool {
	only := map[string]bool{}
	s, ok := st.owner[key]
	if !ok {
		return only
	}
	n, _ := st.views[s].unreadCreate(key)
	keys := st.ownKeys()
	for _, k := range keys[:min(n, len(keys))] {
		only[k] = true
	}
	return only
}

// recordCommit records in the views what the commit res made of each key.
func (st *State) recordCommit(res engine.Result) {
	st.made = make(map[string]driver.Item, len(res.Out))
	for i, tc := range st.order {
		if i < len(res.Out) {
			tc.view.committed(tc.key, res.Out[i])
			st.made[tc.key] = res.Out[i]
		}
	}
}

// noteOthers tells the Stores of the transaction other than its lead
// (whose engine environment the delivery told) what its commit wrote: a
// write from inside a mutate of one of their keys (internal/reentry).
func (st *State) noteOthers(res engine.Result, err error) {
	var told []Store
	for _, tc := range st.order {
		s := tc.view.s
		if s == st.lead || slices.Contains(told, s) {
			continue
		}
		told = append(told, s)
		s.Reentry().NoteWritten(telemetry.OpTransact.String(), st.keys(), res, err)
	}
}
