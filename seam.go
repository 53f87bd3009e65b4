package etagstore

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file is the Store's side of the one seam to the backend packages
// (package internal/access): the writes they offer beyond the Store's
// own — tablestore's Merge, UpsertMerge and Batch — go into the same
// engine as every Store write (the same retries, fences, resolver and
// telemetry), and they borrow the Store's paging, decoding and telemetry
// (tablestore.Query and QueryPage, blobstore.GetIf).

// seam is the backend packages' way into a Store (Store embeds it).
type seam[T any] = access.Seam[T, Doc[T], Page[T]]

// extras implements seam for s.
type extras[T any] struct{ s *Store[T] }

func (x extras[T]) PageWith(ctx context.Context, scope string, limit int, token string, list access.List) (Page[T], error) {
	return x.s.page(ctx, scope, limit, token, list)
}

func (x extras[T]) DecodeItem(it driver.Item) (Doc[T], error) { return x.s.decode(it) }

func (x extras[T]) Expires() bool { return x.s.life != nil }

func (x extras[T]) Observe(ctx context.Context, op access.Op, subject string) (context.Context, func(error)) {
	if op != access.Query && op != access.QueryPage && op != access.GetIf {
		return ctx, func(error) {} // not a backend package's operation: observed by nothing
	}
	ctx, sp := x.s.obs.Begin(ctx, op, subject)
	if !sp.Recording() {
		return ctx, func(error) {}
	}
	return ctx, sp.End
}

// DeliverWrite delivers w, one span.
func (x extras[T]) DeliverWrite(ctx context.Context, w access.Write[T]) ([]ETag, error) {
	op, key := telemetry.OpBatch, ""
	if len(w.Actions) > 0 {
		key = w.Actions[0].Key
	}
	if !w.Batch && len(w.Actions) == 1 && w.Actions[0].Kind == access.Merge {
		op = telemetry.OpMerge
	} else if !w.Batch {
		op = telemetry.OpUpsertMerge
	}
	ctx, sp := x.s.obs.Begin(ctx, op, key)
	defer sp.EndOnPanic() // Encode runs the user's codec
	etags, err := x.s.deliverActions(ctx, op, w)
	sp.End(err)
	return etags, err
}

// action is an access.Action, checked and encoded.
type action[T any] struct {
	access.Action[T]
	data    []byte
	changes []byte // a Replace's changes to the document its Doc was read from
	mine    []byte // a Replace's encoding of its Doc's value, before it was applied (data)
}

func (s *Store[T]) deliverActions(ctx context.Context, op telemetry.Op, w access.Write[T]) ([]ETag, error) {
	acts, err := s.prepare(ctx, op, w)
	if err != nil {
		return nil, err
	}
	fence, fenced := FenceFrom(ctx)
	if !w.Batch {
		return s.deliverOne(ctx, op, acts[0])
	}
	blind := make(request, len(acts))
	keys := make([]string, len(acts))
	for i, a := range acts {
		blind[i], keys[i] = a.blind(fence), a.Key
	}
	if check := s.abilities.CheckCommit; check != nil {
		if err := check(blind.Actions()); err != nil {
			return nil, err
		}
	}
	p, mode := engine.PlanFunc(func(*engine.Delivery, []version) (request, error) { return blind, nil }), engine.Blind
	if fenced { // every action is checked against the version read, and conditioned on it
		p = func(d *engine.Delivery, base []version) (request, error) {
			req, err := s.overAll(d, acts, base)
			if check := s.abilities.CheckCommit; err == nil && check != nil {
				err = check(req.Actions()) // as built: a fenced delete may carry more (driver.ModeTombstone)
			}
			return req, err
		}
		mode = engine.Based
	}
	res, err := s.deliver(ctx, s.delivery(ctx, op, mode, keys, p, nil, nil))
	if err != nil {
		return nil, s.actionRefusal(ctx, acts, fenced, err)
	}
	return etagsOf(res.Out), nil
}

// actionRefusal is err, the failure of a write of acts, naming the action
// at fault: a stale ETag becomes a *ConflictError holding the current
// document (a fenced write's plan made it so already).
func (s *Store[T]) actionRefusal(ctx context.Context, acts []action[T], fenced bool, err error) error {
	var ae *driver.ActionError
	if len(acts) == 1 && !errors.As(err, &ae) && !errors.Is(err, ErrOutcomeUnknown) && sentinelOf(err) != nil {
		// A batch of one action went as a single write: its refusal names
		// the action, as a Commit's would.
		err = &driver.ActionError{Index: 0, Err: err}
	}
	if errors.As(err, &ae) && ae.Index >= 0 && ae.Index < len(acts) && errors.Is(ae.Err, ErrConflict) && !fenced {
		a := acts[ae.Index]
		err = &driver.ActionError{Index: ae.Index, Err: s.refused(ctx, a.Key, a.ETag, a.Mine)}
	}
	return err
}

// deliverOne delivers a single Merge (conditioned on the version it reads,
// whose bookkeeping it extends) or UpsertMerge (unchecked; it carries no
// bookkeeping and so keeps the stored one).
func (s *Store[T]) deliverOne(ctx context.Context, op telemetry.Op, a action[T]) ([]ETag, error) {
	var it driver.Item
	var err error
	if a.Kind == access.Merge {
		it, err = s.conditioned(ctx, op, a.Key, a.ETag, a.Mine, func(d *engine.Delivery, b version) (keyWrite, error) {
			if a.Overlay == nil {
				w := d.Over(b, a.data)
				w.Write.Mode = driver.ModeMerge
				return w, nil
			}
			// The merge is a change from T's encoding of the version read
			// to its overlay, applied as every read-modify-write's: what
			// changed is sent, and a property the merge clears is removed.
			_, base, err := s.enc.StartFrom(b)
			if err != nil {
				return keyWrite{}, err
			}
			mine, err := a.Overlay(base, a.data)
			if err != nil {
				return keyWrite{}, err
			}
			w, err := s.enc.Apply(b, base, mine)
			return over(d, b, w), err
		})
	} else {
		it, err = s.blind(ctx, op, a.blind(0))
	}
	if err != nil {
		return nil, err
	}
	return []ETag{it.ETag}, nil
}

// prepare checks every action before anything is sent — keys, ETags, the
// backend's abilities, fences — and encodes the documents.
func (s *Store[T]) prepare(ctx context.Context, op telemetry.Op, w access.Write[T]) ([]action[T], error) {
	if len(w.Actions) == 0 {
		return nil, errorf(ErrInvalidInput, "%s of no documents", op)
	}
	_, fenced := FenceFrom(ctx)
	acts := make([]action[T], len(w.Actions))
	for i, a := range w.Actions {
		acts[i].Action = a
		if err := s.prepareOne(&acts[i], fenced); err != nil {
			if w.Batch {
				err = &driver.ActionError{Index: i, Err: err}
			}
			return nil, err
		}
	}
	return acts, nil
}

func (s *Store[T]) prepareOne(a *action[T], fenced bool) error {
	if err := s.checkKey(a.Key); err != nil {
		return err
	}
	switch a.Kind {
	case access.Replace, access.Merge, access.Delete:
		if a.ETag == "" {
			return errorf(ErrETagRequired, "%q", a.Key)
		}
	case access.Upsert, access.UpsertMerge:
		if fenced {
			return errorf(ErrInvalidInput, "%q: an unchecked write cannot honour a fencing token", a.Key)
		}
	}
	if (a.Kind == access.Merge || a.Kind == access.UpsertMerge) && !s.abilities.Merge {
		return errorf(ErrInvalidInput, "%q: the backend cannot merge", a.Key)
	}
	if a.Encode == nil {
		return nil
	}
	var err error
	if a.data, err = a.Encode(); err != nil {
		return err
	}
	if x, ok := a.Extra.(Extra); ok && a.Kind == access.Replace {
		return s.prepareReplace(a, x, fenced)
	}
	return nil
}

// prepareReplace makes a's data the change of a batch's Replace, a Doc
// with Extra x, applied to the document the Doc was read from.
func (s *Store[T]) prepareReplace(a *action[T], x Extra, fenced bool) error {
	if a.ETag == ETagAny && x.base != "" && !fenced {
		// Sent blind, it would put back what others changed since the
		// read; a fenced batch reads first and applies the change to the
		// version read (overAll).
		return errorf(ErrInvalidInput, "%q: a batch's Replace with ETagAny of a Doc a read returned would undo others' changes since that read (use Merge with ETagAny, or a Doc built by hand to write T alone)", a.Key)
	}
	a.mine = a.data
	w, err := s.onto(a.Key, a.ETag, x, a.data)
	a.data, a.changes = w.Data, w.Changes
	return err
}

// blind is the write of a that starts from nothing: Create, Replace and
// Upsert start a new history (Create carries fence); Merge and UpsertMerge
// carry no bookkeeping, so the stored one is kept.
func (a action[T]) blind(fence int64) keyWrite {
	switch a.Kind {
	case access.Create:
		return engine.Fresh(a.Key, driver.Cond{Kind: driver.CondCreate}, a.data, fence)
	case access.Replace:
		w := engine.Fresh(a.Key, driver.IfMatch(a.ETag), a.data, 0)
		w.Write.Changes = a.changes
		return w
	case access.Upsert:
		return engine.Fresh(a.Key, driver.Cond{Kind: driver.CondNone}, a.data, 0)
	case access.Merge:
		return engine.Merged(a.Key, driver.IfMatch(a.ETag), a.data)
	case access.UpsertMerge:
		return engine.Merged(a.Key, driver.Cond{Kind: driver.CondNone}, a.data)
	}
	return engine.DeleteOf(a.Key, a.ETag)
}

// overAll builds a fenced batch over the versions read: each action that
// names a version must find it (ETagAny: any) and is conditioned on it;
// Replace and Merge continue its history and record the token.
func (s *Store[T]) overAll(d *engine.Delivery, acts []action[T], base []version) (request, error) {
	req := make(request, len(acts))
	for i, a := range acts {
		b := base[i]
		if a.Kind == access.Create {
			req[i] = a.blind(d.Fence())
			continue
		}
		switch {
		case !b.Exists:
			return nil, &driver.ActionError{Index: i, Err: errorf(ErrNotFound, "%q", a.Key)}
		case a.ETag != ETagAny && b.ETag != a.ETag:
			return nil, &driver.ActionError{Index: i, Err: s.conflictWith(b.Item, a.ETag, a.Mine, 1)}
		}
		switch a.Kind {
		case access.Delete:
			req[i] = d.DeleteOver(b, s.abilities.Tombstones)
		case access.Merge:
			req[i] = d.Over(b, a.data)
			req[i].Write.Mode = driver.ModeMerge
		case access.Replace:
			x, _ := a.Extra.(Extra)
			if x.base == "" || b.ETag == x.etag {
				req[i] = d.Over(b, a.data)
				req[i].Write.Changes = a.changes // nil unless relative to a.ETag, which b is
				continue
			}
			w, err := s.changeOnto(b, x, a.mine) // ETagAny over a later version: the Doc's change onto it
			if err != nil {
				return nil, &driver.ActionError{Index: i, Err: err}
			}
			req[i] = over(d, b, w)
		default:
			req[i] = d.Over(b, a.data)
		}
	}
	return req, nil
}

func etagsOf(items []driver.Item) []ETag {
	out := make([]ETag, len(items))
	for i, it := range items {
		out[i] = it.ETag
	}
	return out
}
