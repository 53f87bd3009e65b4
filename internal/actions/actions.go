// Package actions delivers the writes the backend packages offer beyond
// a Store's own (an access.Write: tablestore's Merge, UpsertMerge and
// Batch) through the same engine as every Store write — the same
// retries, fences, resolver and telemetry: every action checked and
// encoded before anything is sent, a batch blind or, fenced, built over
// the versions it reads, a single merge conditioned on the version it
// reads. It knows T only as the caller's value a *ConflictError carries,
// and reaches the Store through its Store interface. Its refusals match
// the driver's sentinels, as the root's do.
package actions

import (
	"context"
	"errors"
	"slices"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/codec"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/fence"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// Store is a Store of T as a delivery of actions knows it (the root's
// typed adapter).
type Store[T any] interface {
	CheckKey(key string) error
	Abilities() *driver.Abilities
	Codec() codec.Of[T]
	// Deliver runs a delivery of a write of keys through the engine,
	// carrying ctx's fencing token, and keeps what it wrote in the cache;
	// start is the base of its first attempt (engine.Options.Start; nil:
	// read).
	Deliver(ctx context.Context, op telemetry.Op, mode engine.Mode, keys []string, p engine.Plan, start []engine.Version) (engine.Result, error)
	// Known is the version of key a write naming etag (ETagAny: any) may
	// start from without reading, if there is one: the version extra (an
	// Action's Extra) holds as its Doc's read, at etag, else the version
	// cache's copy. It is not verified: it may be stale.
	Known(ctx context.Context, key string, etag driver.ETag, extra any) (engine.Version, bool)
	// ReadAll reads keys, together where the backend can (ReadMany),
	// as the engine reads them: a missing key is a version that does not
	// exist.
	ReadAll(ctx context.Context, keys []string) ([]engine.Version, error)
	// Expires reports whether the Store's documents expire: a key read as
	// missing may then hold an expired document, which a create replaces
	// on its ETag.
	Expires() bool
	// Blind delivers w, a write that starts from nothing.
	Blind(ctx context.Context, op telemetry.Op, w engine.KeyWrite) (driver.Item, error)
	// Conditioned delivers a write of key conditioned on the version it
	// reads, which must hold held (ETagAny: any); write builds it.
	Conditioned(ctx context.Context, op telemetry.Op, key string, held driver.ETag, mine T, write func(*engine.Delivery, engine.Version) (engine.KeyWrite, error)) (driver.Item, error)
	// Refused is the error of a write holding held refused with 412.
	Refused(ctx context.Context, key string, held driver.ETag, mine T) error
	// ConflictWith is the *ConflictError of a write holding held that
	// found it, the current version.
	ConflictWith(it driver.Item, held driver.ETag, mine T, attempts int) error
	// ReadOf reports whether extra (an Action's Extra) is the Store's,
	// whether its Doc was read (not built by hand), and the ETag of the
	// version it holds.
	ReadOf(extra any) (read bool, etag driver.ETag, ok bool)
	// Onto is the write of mine over the document extra holds, its Doc
	// conditioned on etag; ChangeOnto the Doc's change applied to b, a
	// version read just now.
	Onto(key string, etag driver.ETag, extra any, mine []byte) (codec.Written, error)
	ChangeOnto(b engine.Version, extra any, mine []byte) (codec.Written, error)
	// KeepsEntries reports whether the Store's writes imply index
	// entries, which need the version each write replaces: a batch then
	// reads its keys first.
	KeepsEntries() bool
}

// action is an access.Action, checked and encoded.
type action[T any] struct {
	access.Action[T]
	data    []byte
	changes []byte // a Replace's changes to the document its Doc was read from
	mine    []byte // a Replace's encoding of its Doc's value, before it was applied (data)
}

// written is a's document and, for a Replace, its changes.
func (a action[T]) written() codec.Written { return codec.Written{Data: a.data, Changes: a.changes} }

// Named is the operation w is (Batch, Merge or UpsertMerge) and the key
// its span names: its first action's.
func Named[T any](w access.Write[T]) (op telemetry.Op, key string) {
	op = telemetry.OpBatch
	if len(w.Actions) > 0 {
		key = w.Actions[0].Key
	}
	if !w.Batch && len(w.Actions) == 1 && w.Actions[0].Kind == access.Merge {
		op = telemetry.OpMerge
	} else if !w.Batch {
		op = telemetry.OpUpsertMerge
	}
	return op, key
}

// Deliver delivers w, op, through s, and returns each action's new ETag.
// A refusal of one action of several is a *driver.ActionError; a stale
// ETag, a *ConflictError holding the current document.
func Deliver[T any](ctx context.Context, s Store[T], op telemetry.Op, w access.Write[T]) ([]driver.ETag, error) {
	acts, err := prepare(ctx, s, op, w)
	if err != nil {
		return nil, err
	}
	fence, fenced := fence.From(ctx)
	if !w.Batch {
		return deliverOne(ctx, s, op, acts[0])
	}
	blind := make(engine.Request, len(acts))
	keys := make([]string, len(acts))
	for i, a := range acts {
		blind[i], keys[i] = a.blind(fence), a.Key
	}
	if check := s.Abilities().CheckCommit; check != nil {
		if err := check(blind.Actions()); err != nil {
			return nil, err
		}
	}
	p, mode := engine.PlanFunc(func(*engine.Delivery, []engine.Version) (engine.Request, error) { return blind, nil }), engine.Blind
	var start []engine.Version
	if fenced || s.KeepsEntries() && !slices.ContainsFunc(acts, merges[T]) {
		// Every action is checked against the version read, and
		// conditioned on it: a fence's token goes on each, and the
		// index entries a write implies need the version it replaces.
		// (A merge on an indexed Store goes blind, and its entries
		// refuse it before anything is sent.) An unfenced batch reads
		// only the keys whose versions it does not know, and its first
		// send no entry (known.go).
		predict := !fenced
		p = func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
			req, err := overAll(s, d, acts, base)
			if check := s.Abilities().CheckCommit; err == nil && check != nil {
				err = check(req.Actions()) // as built: a fenced delete may carry more (driver.ModeTombstone)
			}
			if err == nil && predict {
				predict = false
				predictFree(ctx, d, req)
			}
			return req, err
		}
		mode = engine.Based
		if !fenced {
			if start, err = startOf(ctx, s, acts); err != nil {
				return nil, refusal(ctx, s, acts, fenced, err)
			}
		}
	}
	res, err := s.Deliver(ctx, op, mode, keys, p, start)
	if err != nil {
		return nil, refusal(ctx, s, acts, fenced, err)
	}
	out := make([]driver.ETag, len(res.Out))
	for i, it := range res.Out {
		out[i] = it.ETag
	}
	return out, nil
}

// refusal is err, the failure of a write of acts, naming the action at
// fault: a stale ETag becomes a *ConflictError holding the current
// document (a fenced write's plan made it so already).
func refusal[T any](ctx context.Context, s Store[T], acts []action[T], fenced bool, err error) error {
	var ae *driver.ActionError
	if len(acts) == 1 && !errors.As(err, &ae) && !errors.Is(err, driver.ErrOutcomeUnknown) && driver.SentinelOf(err) != nil {
		// A batch of one action went as a single write: its refusal names
		// the action, as a Commit's would.
		err = &driver.ActionError{Index: 0, Err: err}
	}
	if errors.As(err, &ae) && ae.Index >= 0 && ae.Index < len(acts) && errors.Is(ae.Err, driver.ErrConflict) && !fenced {
		a := acts[ae.Index]
		err = &driver.ActionError{Index: ae.Index, Err: s.Refused(ctx, a.Key, a.ETag, a.Mine)}
	}
	return err
}

// deliverOne delivers a single Merge (conditioned on the version it reads,
// whose bookkeeping it extends) or UpsertMerge (unchecked; it carries no
// bookkeeping and so keeps the stored one).
func deliverOne[T any](ctx context.Context, s Store[T], op telemetry.Op, a action[T]) ([]driver.ETag, error) {
	var it driver.Item
	var err error
	if a.Kind == access.Merge {
		it, err = s.Conditioned(ctx, op, a.Key, a.ETag, a.Mine, func(d *engine.Delivery, b engine.Version) (engine.KeyWrite, error) {
			if a.Overlay == nil {
				w := d.Over(b, a.data)
				w.Write.Mode = driver.ModeMerge
				return w, nil
			}
			// The merge is a change from T's encoding of the version read
			// to its overlay, applied as every read-modify-write's: what
			// changed is sent, and a property the merge clears is removed.
			_, base, err := s.Codec().StartFrom(b)
			if err != nil {
				return engine.KeyWrite{}, err
			}
			mine, err := a.Overlay(base, a.data)
			if err != nil {
				return engine.KeyWrite{}, err
			}
			w, err := s.Codec().Apply(b, base, mine)
			return w.Over(d, b), err
		})
	} else {
		it, err = s.Blind(ctx, op, a.blind(0))
	}
	if err != nil {
		return nil, err
	}
	return []driver.ETag{it.ETag}, nil
}

// prepare checks every action before anything is sent — keys, ETags, the
// backend's abilities, fences — and encodes the documents.
func prepare[T any](ctx context.Context, s Store[T], op telemetry.Op, w access.Write[T]) ([]action[T], error) {
	if len(w.Actions) == 0 {
		return nil, driver.Errorf(driver.ErrInvalidInput, "%s of no documents", op)
	}
	_, fenced := fence.From(ctx)
	acts := make([]action[T], len(w.Actions))
	for i, a := range w.Actions {
		acts[i].Action = a
		if err := prepareOne(s, &acts[i], fenced); err != nil {
			if w.Batch {
				err = &driver.ActionError{Index: i, Err: err}
			}
			return nil, err
		}
	}
	return acts, nil
}

func prepareOne[T any](s Store[T], a *action[T], fenced bool) error {
	if err := s.CheckKey(a.Key); err != nil {
		return err
	}
	switch a.Kind {
	case access.Replace, access.Merge, access.Delete:
		if a.ETag == "" {
			return driver.Errorf(driver.ErrETagRequired, "%q", a.Key)
		}
	case access.Upsert, access.UpsertMerge:
		if fenced {
			return driver.Errorf(driver.ErrInvalidInput, "%q: an unchecked write cannot honour a fencing token", a.Key)
		}
	}
	if (a.Kind == access.Merge || a.Kind == access.UpsertMerge) && !s.Abilities().Merge {
		return driver.Errorf(driver.ErrInvalidInput, "%q: the backend cannot merge", a.Key)
	}
	if a.Encode == nil {
		return nil
	}
	var err error
	if a.data, err = a.Encode(); err != nil {
		return err
	}
	if read, _, ok := s.ReadOf(a.Extra); ok && a.Kind == access.Replace {
		return prepareReplace(s, a, read, fenced)
	}
	return nil
}

// prepareReplace makes a's data the change of a batch's Replace, a Doc
// with the Store's Extra (of a Doc a read returned: read), applied to the
// document the Doc was read from.
func prepareReplace[T any](s Store[T], a *action[T], read, fenced bool) error {
	if a.ETag == driver.ETagAny && read && !fenced {
		// Sent blind, it would put back what others changed since the
		// read; a fenced batch reads first and applies the change to the
		// version read (overAll).
		return driver.Errorf(driver.ErrInvalidInput, "%q: a batch's Replace with ETagAny of a Doc a read returned would undo others' changes since that read (use Merge with ETagAny, or a Doc built by hand to write T alone)", a.Key)
	}
	a.mine = a.data
	w, err := s.Onto(a.Key, a.ETag, a.Extra, a.data)
	a.data, a.changes = w.Data, w.Changes
	return err
}

// merges reports whether a sends properties alone (Merge, UpsertMerge).
func merges[T any](a action[T]) bool {
	return a.Kind == access.Merge || a.Kind == access.UpsertMerge
}

// blind is the write of a that starts from nothing: Create, Replace and
// Upsert start a new history (Create carries fence); Merge and UpsertMerge
// carry no bookkeeping, so the stored one is kept.
func (a action[T]) blind(fence int64) engine.KeyWrite {
	switch a.Kind {
	case access.Create:
		return engine.Fresh(a.Key, driver.Cond{Kind: driver.CondCreate}, a.data, fence)
	case access.Replace:
		return a.written().Fresh(a.Key, a.ETag)
	case access.Upsert:
		return engine.Fresh(a.Key, driver.Cond{Kind: driver.CondNone}, a.data, 0)
	case access.Merge:
		return engine.Merged(a.Key, driver.IfMatch(a.ETag), a.data)
	case access.UpsertMerge:
		return engine.Merged(a.Key, driver.Cond{Kind: driver.CondNone}, a.data)
	}
	return engine.DeleteOf(a.Key, a.ETag)
}

// overAll builds a batch over the versions read (fenced, or of a Store
// that keeps index entries): each action that names a version must find
// it (ETagAny: any) and is conditioned on it; Replace and Merge continue
// its history and record the token; a Create must find the key missing
// (or expired), and an Upsert is conditioned on what it found.
func overAll[T any](s Store[T], d *engine.Delivery, acts []action[T], base []engine.Version) (engine.Request, error) {
	req := make(engine.Request, len(acts))
	for i, a := range acts {
		b := base[i]
		switch a.Kind {
		case access.Create:
			if b.Exists {
				return nil, &driver.ActionError{Index: i, Err: driver.Errorf(driver.ErrExists, "%q", a.Key)}
			}
			req[i] = d.Over(b, a.data) // a create, or over an expired version
			// Known missing, not read (known.go): the key found existing
			// refuses the commit, and that ends the batch (ErrExists).
			req[i].Unread = !b.Verified
			continue
		case access.Upsert:
			req[i] = d.Over(b, a.data) // a create, or over the version read
			continue
		}
		switch {
		case !b.Exists:
			return nil, &driver.ActionError{Index: i, Err: driver.Errorf(driver.ErrNotFound, "%q", a.Key)}
		case a.ETag != driver.ETagAny && b.ETag != a.ETag:
			return nil, &driver.ActionError{Index: i, Err: s.ConflictWith(b.Item, a.ETag, a.Mine, 1)}
		}
		switch a.Kind {
		case access.Delete:
			req[i] = d.DeleteOver(b, s.Abilities().Tombstones)
		case access.Merge:
			req[i] = d.Over(b, a.data)
			req[i].Write.Mode = driver.ModeMerge
		case access.Replace:
			if read, etag, _ := s.ReadOf(a.Extra); !read || b.ETag == etag {
				req[i] = a.written().Over(d, b) // its changes nil unless relative to a.ETag, which b is
				continue
			}
			w, err := s.ChangeOnto(b, a.Extra, a.mine) // ETagAny over a later version: the Doc's change onto it
			if err != nil {
				return nil, &driver.ActionError{Index: i, Err: err}
			}
			req[i] = w.Over(d, b)
		default:
			req[i] = d.Over(b, a.data)
		}
	}
	return req, nil
}
