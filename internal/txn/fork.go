package txn

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// A batch member's run of fn (batch.go): a fork of the batch's
// transaction so far, what the member's fn did in it itself, and its
// adoption.

// ownTouches is what one member's fn did itself in a fork: the keys it
// touched, in order, and those it wrote. Nil outside a batch: every
// method is then a no-op.
type ownTouches struct {
	keys    []string
	seen    map[string]bool
	written map[string]bool
	// inherited: the keys earlier members wrote, as the fork began; other:
	// fn touched one, whose version is not stored yet, so an error or
	// panic of fn may have been made on it.
	inherited map[string]bool
	other     bool
	onRead    func(start bool)
}

func (o *ownTouches) touch(key string) {
	if o != nil && !o.seen[key] {
		o.seen[key] = true
		o.keys = append(o.keys, key)
	}
}

// saw records that fn touched key.
func (o *ownTouches) saw(key string) {
	if o.pending(key) {
		o.other = true
	}
}

// pendingBefore reports whether fn touched a key an earlier member wrote
// (not stored yet) before it first touched key.
func (o *ownTouches) pendingBefore(key string) bool {
	if o == nil {
		return false
	}
	for _, k := range o.keys {
		if k == key {
			return false
		}
		if o.inherited[k] {
			return true
		}
	}
	return false
}

// pending reports whether an earlier member wrote key.
func (o *ownTouches) pending(key string) bool { return o != nil && o.inherited[key] }

func (o *ownTouches) wrote(key string) {
	if o != nil {
		o.written[key] = true
	}
}

func (o *ownTouches) reading(start bool) {
	if o != nil && o.onRead != nil {
		o.onRead(start)
	}
}

// firstWritten is the first key the member's fn wrote, if any.
func (st *State) firstWritten() (string, bool) {
	if st == nil || st.own == nil {
		return "", false
	}
	for _, key := range st.own.keys {
		if st.own.written[key] {
			return key, true
		}
	}
	return "", false
}

// fork is a copy of st, a batch's transaction so far, for a member's fn
// under ctx: the writes it holds are marked inherited, and the member's
// own touches are recorded apart (onRead hears of its reads).
func (st *State) fork(ctx context.Context, onRead func(bool)) *State {
	f := &State{ctx: ctx, lead: st.lead, copies: st.copies, attempt: st.attempt, ahead: st.ahead,
		owner: make(map[string]Store, len(st.owner)), views: make(map[Store]*View, len(st.views)),
		order: make([]touch, len(st.order), len(st.order)+4),
		own:   &ownTouches{seen: map[string]bool{}, written: map[string]bool{}, inherited: map[string]bool{}, onRead: onRead}}
	for k, c := range st.owner {
		f.owner[k] = c
	}
	for c, v := range st.views {
		f.views[c] = v.fork()
	}
	for i, tc := range st.order {
		f.order[i] = touch{f.views[tc.view.s], tc.key}
	}
	for _, tc := range st.order {
		if tc.view.wrote(tc.key) {
			f.own.inherited[tc.key] = true
		}
	}
	return f
}

// adopt makes f, a fork of st whose fn succeeded, the batch's
// transaction so far.
func (st *State) adopt(f *State) {
	st.views, st.owner, st.order = f.views, f.owner, f.order
	if st.lead == nil {
		st.lead = f.lead
	}
}

// mayDefer reports whether r may wait for the next batch: an attempt of
// its lead's policy is left for it.
func (r *member) mayDefer() bool {
	mu.Lock()
	defer mu.Unlock()
	max := r.call.lead.Env().Policy.MaxAttempts
	return max == 0 || r.runs < max
}

// staleOf is the failure of a transaction whose last run acted on a view
// that was not current, as the engine words it.
func staleOf(st *State) error {
	key := ""
	if keys := st.ownKeys(); len(keys) > 0 {
		key = keys[0]
	}
	return driver.Errorf(driver.ErrConflict, "%s %q: %v", telemetry.OpTransact, key, engine.ErrStale)
}
