package etagstore

import (
	"context"
	"errors"
	"strconv"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/members"
	"github.com/etagstore/etagstore/internal/meta"
)

// The delivery engine: every write of every package reaches a backend
// through engine.run — single writes, Update and Save, group-commit
// batches, table merges and batches. One attempt is
//
//	base → admit → build → send → (refusal | settle)
//
// base: the versions the write starts from (none for a blind write, else
// known or read); admit: no newer fencing token holds them; build: the
// plan's request over them (none: nothing to write, confirm); send: one
// request; refusal: a definite answer (a lost race is retried from a new
// base, a throttled request sent again as it is, anything else reported);
// settle: a lost answer, resolved by reading (resolve.go). What an attempt
// leaves to the next is one value, a carry. The retry loop (retry.go)
// decides when the next attempt runs.

// keyWrite is one key's part of a request: a write or delete as sent.
type keyWrite struct {
	driver.Action
	meta meta.Meta // the bookkeeping Write.Meta holds; its last id is this write's
}

// request is what one attempt sends: one key's write, or several that the
// backend applies atomically (driver.Abilities.Commit).
type request []keyWrite

// plan builds the request of an attempt from base, the current versions
// of the engine's keys (nil for a blind write, which starts from nothing).
// An empty request means nothing needs writing. e is the engine asking
// (its over builds a write over a version; its one makes a request of one
// write without allocating).
type plan interface {
	build(e *engine, base []version) (request, error)
}

// planFunc is a plan written as a function.
type planFunc func(e *engine, base []version) (request, error)

func (f planFunc) build(e *engine, base []version) (request, error) { return f(e, base) }

// version is a version of a key an attempt starts from.
type version struct {
	driver.Item
	meta      meta.Meta
	exists    bool
	verified  bool   // read during this call: current at some instant of it
	metaKnown bool   // false for a caller's Doc, whose bookkeeping is not at hand
	canonical bool   // Data is exactly what the codec makes of its value
	missing   error  // why it does not exist, when read so (matches ErrNotFound)
	extra     []byte // the members T does not know (members.Unknown)
}

// flight is how group commit follows the write that holds its members'
// mutations. hold is asked before each send of a request built from the
// changes just applied (or sent again after a throttled try); false means a
// member whose change it holds has left, and the changes are applied again
// without it. release says the request did not land.
type flight interface {
	hold() bool
	release()
}

// alone is the flight of a write with no group behind it.
type alone struct{}

func (alone) hold() bool { return true }
func (alone) release()   {}

// carry is what an attempt leaves to the next; at most one of resend, base
// and check is set.
type carry struct {
	resend request   // send again as it is (not landed, or refused unapplied)
	base   []version // start from these, known without a read
	check  request   // refused with 412: the next read confirms it did not land
	raced  bool      // the attempt lost a race
}

// errStale is what a plan that reads for itself (a transaction) reports
// when a version it read changed before it could send: the engine builds
// it again after a pause, as after a lost race.
var errStale = errors.New("etagstore: a document read has changed")

// engine carries one write to the backend until its fate is known.
type engine struct {
	c     *core
	op    string
	keys  []string // keys[0] names the write in errors
	based bool     // attempts start from the current versions of keys
	// rebuilds: a request refused for stale versions is built again (with
	// based, or a plan that reads for itself: a transaction), where a
	// blind write reports the refusal.
	rebuilds bool
	fence    int64
	fenced   bool
	plan     plan
	flight   flight

	then      carry
	unsettled error // what lost the answer of a request not settled yet
	held      ETag  // the ETag the last request was conditioned on
	attempts  int
	cachedWon bool          // the first write, on a version not read, went through
	out       []driver.Item // per key, the version written (a superseded ETag and no data: later writes followed)

	// Room for a write of one key, so that it allocates no slices.
	key1  [1]string
	out1  [1]driver.Item
	base1 [1]version
	req1  [1]keyWrite
}

// newEngine returns the engine of a write of keys (set keys, or call on
// for one key).
func (c *core) newEngine(ctx context.Context, op string, based bool, p plan) *engine {
	fence, fenced := FenceFrom(ctx)
	return &engine{c: c, op: op, based: based, rebuilds: based, plan: p, flight: alone{}, fence: fence, fenced: fenced}
}

// on makes key the one key of the write.
func (e *engine) on(key string) *engine {
	e.key1[0] = key
	e.keys = e.key1[:]
	return e
}

// one is the request of the single write w. It lives in the engine: a
// request carried to the next attempt (to send again, or to check) is used
// before the next one is built.
func (e *engine) one(w keyWrite) request {
	e.req1[0] = w
	return e.req1[:]
}

// run delivers the write under the retry policy. A write whose answer was
// lost and never settled ends as an *OutcomeUnknownError; every other
// failure is returned as the attempt that ended the loop reported it.
func (e *engine) run(ctx context.Context) error {
	if e.fenced {
		e.then.base = nil // the token is checked against a version read now
	}
	warm := 0
	if e.rebuilds && len(e.keys) > 0 {
		warm = e.c.heat.warmth(e.name())
	}
	attempts, err := retry(ctx, e.c.retry, e.c.clock, e.attempt, warm, e.c.obs, e.op)
	if e.rebuilds && len(e.keys) > 0 {
		e.c.heat.learn(e.name(), attempts, e.c.clock)
	}
	e.attempts = attempts
	switch {
	case err == nil:
		w := e.wrote()
		for _, it := range e.out {
			e.c.cacheItem(it, w)
		}
		return nil
	case e.unsettled != nil && !errors.Is(err, ErrOutcomeUnknown):
		return outcomeUnknown(e.op, e.name(), errors.Join(e.unsettled, err))
	}
	return err
}

// wrote is what e knows of the version it left, beyond e.out: for a
// read-modify-write of one key over a version holding no member T does
// not know, that the version holds none either (what it kept beyond T
// was nothing), and its bookkeeping parsed when it is the one sent.
func (e *engine) wrote() notes {
	m, ok := e.plan.(*modification)
	if !ok || m.extra != nil || len(e.out) != 1 {
		return notes{}
	}
	w := notes{plain: true}
	out, sent := e.out[0], e.req1[0]
	if out.Meta == sent.Write.Meta {
		w.parsed, w.meta = true, sent.meta
	}
	return w
}

// name is the key that names the write in errors and logs.
func (e *engine) name() string {
	if len(e.keys) == 0 {
		return ""
	}
	return e.keys[0]
}

// raced reports whether the write ended having lost its last race.
func (e *engine) raced() bool { return e.then.raced }

// attempt is one step of the retry loop.
func (e *engine) attempt(ctx context.Context, n int) (next, error) {
	e.attempts = n
	c := e.then
	e.then = carry{}
	if c.raced {
		e.c.obs.absorbedConflict(ctx)
	}
	if c.resend != nil && (e.unsettled != nil || e.flight.hold()) {
		return e.send(ctx, c.resend, true)
	}
	base, err := e.base(ctx, c.base)
	if err != nil {
		return stop, err
	}
	if c.check != nil && e.foundLanded(c.check, base) {
		return stop, nil
	}
	if err := e.admit(base); err != nil {
		return stop, err
	}
	req, err := e.plan.build(e, base)
	if errors.Is(err, errStale) && e.rebuilds {
		e.then = carry{raced: true} // a transaction's read changed: run it again
		return afterPause, errorf(ErrConflict, "%v", err)
	}
	if err != nil {
		return stop, err
	}
	if len(req) == 0 {
		return e.confirm(ctx, base)
	}
	if err := ctx.Err(); err != nil {
		return stop, err // nothing sent; run reports an unsettled earlier request
	}
	if !e.flight.hold() {
		e.then.base = base // a member left the batch: apply again without it
		return redo, nil
	}
	return e.send(ctx, req, verified(base))
}

// base returns the versions an attempt starts from: none for a blind
// write, the known ones, or a read.
func (e *engine) base(ctx context.Context, known []version) ([]version, error) {
	switch {
	case !e.based:
		return nil, nil
	case known != nil:
		return known, nil
	}
	return e.read(ctx)
}

// read reads every key of the write.
func (e *engine) read(ctx context.Context) ([]version, error) {
	vs := e.base1[:]
	if len(e.keys) != 1 {
		vs = make([]version, len(e.keys))
	}
	for i, key := range e.keys {
		it, err := e.c.b.Read(ctx, key)
		e.c.cache.note(key, it, err)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		vs[i] = e.c.readVersion(key, it, err)
	}
	return vs, nil
}

// readVersion is the version a read of key found (it, or err matching
// ErrNotFound).
func (c *core) readVersion(key string, it driver.Item, err error) version {
	if err != nil {
		return version{Item: driver.Item{Key: key}, verified: true, metaKnown: true, missing: err}
	}
	return c.stored(it, true)
}

// stored is the version it, read (verified) or known from a write.
func (c *core) stored(it driver.Item, verified bool) version {
	v := c.storedPlain(it, verified)
	v.meta = meta.Parse(it.Meta)
	v.extra = members.Unknown(it.Data, c.known)
	v.canonical = v.canonical && v.extra == nil
	return v
}

// storedPlain is stored for an it known to hold no member T does not
// know, without looking, and without its meta (set it).
func (c *core) storedPlain(it driver.Item, verified bool) version {
	return version{Item: it, exists: true, verified: verified, metaKnown: true, canonical: c.verbatim}
}

// keep is data, a new encoding of b's document, with the members of b that
// T does not know added back (nothing a write did not touch is lost).
func (b version) keep(data []byte) []byte {
	if !b.exists {
		return data
	}
	return members.Add(data, b.extra)
}

func verified(vs []version) bool {
	for _, v := range vs {
		if !v.verified {
			return false
		}
	}
	return true
}

// foundLanded reports whether req, refused with 412, is found in base
// after all: the refusal answered a retry, below the Store, of req itself
// after its answer was lost. (A backend that sees such a retry marks the
// refusal driver.ErrAmbiguous and the engine settles it; this is the
// defence for one that cannot see it.)
func (e *engine) foundLanded(req request, base []version) bool {
	if len(base) != len(req) || !verified(base) {
		return false
	}
	if v := resolveRequest(req, base); v == committed {
		e.out = e.foundIn(req, base)
		return true
	}
	return false
}

// admit refuses a write over a version that a newer fencing token holds.
func (e *engine) admit(base []version) error {
	if !e.fenced {
		return nil
	}
	for i, b := range base {
		if err := checkFence(b.Key, b.meta, e.fence); err != nil {
			return e.nameAction(i, err)
		}
	}
	return nil
}

// nameAction wraps err in a *driver.ActionError when the write has several
// keys.
func (e *engine) nameAction(i int, err error) error {
	if len(e.keys) == 1 {
		return err
	}
	return &driver.ActionError{Index: i, Err: err}
}

// confirm ends an attempt that has nothing to write. Versions not read
// during this call are confirmed by a read first; if they moved on, the
// change is built again over the new ones. (Versions not read never live
// in e.base1, which the read fills.)
func (e *engine) confirm(ctx context.Context, base []version) (next, error) {
	if !verified(base) {
		cur, err := e.read(ctx)
		if err != nil {
			return stop, err
		}
		for i := range cur {
			if cur[i].exists != base[i].exists || cur[i].ETag != base[i].ETag {
				e.then.base = cur // moved on: build over the current versions
				return redo, nil
			}
		}
	}
	e.out = e.out1[:0]
	for _, b := range base {
		e.out = append(e.out, b.Item)
	}
	return stop, nil
}

// send sends req once and classifies the answer.
func (e *engine) send(ctx context.Context, req request, verified bool) (next, error) {
	if err := ctx.Err(); err != nil {
		return stop, err // nothing sent; run reports an unsettled earlier request
	}
	e.held = req[0].Write.Cond.ETag
	err := e.transmit(ctx, req)
	switch {
	case err == nil:
		e.unsettled = nil
		e.cachedWon = !verified
		return stop, nil
	case e.unsettled != nil || ambiguous(err):
		if e.unsettled == nil {
			e.unsettled = err
		}
		return e.settle(ctx, req)
	}
	return e.refusal(ctx, req, verified, err)
}

// transmit sends req: one Write or Delete, or a Commit of several. On
// success e.out holds the versions written.
func (e *engine) transmit(ctx context.Context, req request) error {
	if len(req) > 1 {
		return e.commit(ctx, req)
	}
	w := req[0]
	var etag ETag
	var err error
	if w.Delete {
		err = e.c.b.Delete(ctx, w.Key, w.Write.Cond.ETag)
	} else {
		etag, err = e.c.b.Write(ctx, w.Key, w.Write)
	}
	if err == nil {
		e.out1[0] = written(w, etag)
		e.out = e.out1[:]
	}
	return err
}

// commit sends a multi-key request as one atomic Commit.
func (e *engine) commit(ctx context.Context, req request) error {
	commit := e.c.abilities.Commit
	if commit == nil {
		return errorf(errors.ErrUnsupported, "%s: the backend cannot write several documents atomically", e.op)
	}
	etags, err := commit(ctx, actionsOf(req))
	if err != nil {
		return err
	}
	e.out = make([]driver.Item, len(req))
	for i, w := range req {
		var etag ETag
		if i < len(etags) {
			etag = etags[i]
		}
		e.out[i] = written(w, etag)
	}
	return nil
}

// written is the version w made, with etag ("" when the backend did not
// say, or for a delete).
func written(w keyWrite, etag ETag) driver.Item {
	if w.Delete || w.Write.Mode == driver.ModeMerge {
		return driver.Item{Key: w.Key, ETag: etag} // no whole document to keep
	}
	return driver.Item{Key: w.Key, Data: w.Write.Data, Meta: w.Write.Meta, ETag: etag}
}

// refusal acts on a definite refusal of req. A throttled request is sent
// again as it is after a pause. A blind write reports every other refusal.
// A write built on versions that turn out stale is built again: at once
// when they were only a copy, after a pause when it lost a race.
func (e *engine) refusal(ctx context.Context, req request, verified bool, err error) (next, error) {
	e.flight.release()
	conflict := errors.Is(err, ErrConflict)
	switch {
	case errors.Is(err, driver.ErrNotApplied):
		e.then = carry{resend: req}
		return afterPause, err
	case !e.rebuilds:
		return stop, err
	case !verified && (conflict || errors.Is(err, ErrNotFound)):
		for _, w := range req {
			e.c.cache.stale(w.Key, w.Write.Cond.ETag, e.c.clock)
		}
		if conflict {
			e.c.obs.absorbedConflict(ctx)
		}
		e.then = carry{check: req}
		return now, err
	case conflict || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) && req[0].Write.Cond.Kind != driver.CondCreate:
		e.then = carry{check: req, raced: true}
		return afterPause, err
	}
	return stop, err
}

// settle reads after req's answer was lost and acts on the verdict:
// committed ends the write, not landed sends it again, not applied builds
// it again over the versions read; anything else is unknown.
func (e *engine) settle(ctx context.Context, req request) (next, error) {
	base, v, err := e.readAfterLoss(ctx, req)
	if err != nil {
		return stop, err
	}
	switch {
	case v == committed:
		e.unsettled = nil
		e.out = e.foundIn(req, base)
		return stop, nil
	case v == notLanded:
		e.then = carry{resend: req}
		return now, outcomeUnknown(e.op, e.name(), e.unsettled)
	case v == notApplied && e.rebuilds:
		e.unsettled = nil
		e.flight.release()
		e.then = carry{base: base, raced: true}
		return afterPause, errorf(ErrConflict, "%q moved on", e.name())
	}
	return stop, outcomeUnknown(e.op, e.name(), e.unsettled)
}

// readAfterLoss reads the keys of req after its answer was lost and
// resolves it; a read that fails otherwise than "not found" leaves the
// outcome unknown.
func (e *engine) readAfterLoss(ctx context.Context, req request) ([]version, verdict, error) {
	base := make([]version, len(req))
	for i, w := range req {
		it, err := e.c.b.Read(ctx, w.Key)
		e.c.cache.note(w.Key, it, err)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, unknown, outcomeUnknown(e.op, e.name(), errors.Join(e.unsettled, err))
		}
		base[i] = e.c.readVersion(w.Key, it, err)
	}
	v := resolveRequest(req, base)
	e.c.obs.lostResponse(ctx, e.op, e.name(), v)
	return base, v, nil
}

// foundIn is what req, found committed in base, made of each key: the
// version read where it is req's own, otherwise (later writes followed
// it) a Superseded ETag naming the write, and no document.
func (e *engine) foundIn(req request, base []version) []driver.Item {
	out := make([]driver.Item, len(req))
	for i, w := range req {
		out[i] = driver.Item{Key: w.Key}
		switch {
		case w.Delete:
		case base[i].exists && base[i].meta.LastID() == w.meta.LastID() && w.meta.IDs != "":
			out[i] = base[i].Item
		default:
			out[i].ETag = superseded(w.meta, -1)
		}
	}
	return out
}

// superseded is the ETag of a state that write made but that was never
// stored as a version of its own: the state member n of a group-commit
// batch left (n < 0: the write's own, found committed with later writes
// after it). It names the write by its id; a write without bookkeeping
// gets a fresh id.
func superseded(write meta.Meta, n int) ETag {
	id := write.LastID()
	if write.IDs == "" {
		id = meta.NewID()
	}
	if n >= 0 {
		id += "." + strconv.Itoa(n)
	}
	return driver.Superseded(id)
}

// cacheItem records in the version cache what a write made of it.Key,
// with what the write knew of it.
func (c *core) cacheItem(it driver.Item, w notes) {
	if it.ETag == "" || it.Data == nil {
		c.cache.drop(it.Key)
		return
	}
	c.cache.keep(it.Key, it, w)
}

// fresh is a write that starts a new history of key: a new write id and
// lineage, carrying fence (0: none).
func fresh(key string, c driver.Cond, data []byte, fence int64) keyWrite {
	m := meta.Fresh(meta.NewID(), fence)
	return keyWrite{Action: driver.Action{Key: key, Write: driver.Write{Data: data, Cond: c, Meta: m.String()}}, meta: m}
}

// over is the write of data over b, carrying fencing token fence (0:
// none): create-only when b is missing, otherwise If-Match b's ETag,
// continuing b's history with a new write id and the higher token
// (starting a new history when b's bookkeeping is not at hand).
func (c *core) over(b version, data []byte, fence int64) keyWrite {
	switch {
	case !b.exists:
		return fresh(b.Key, driver.Cond{Kind: driver.CondCreate}, data, fence)
	case !b.metaKnown:
		return fresh(b.Key, driver.IfMatch(b.ETag), data, fence)
	}
	m := b.meta.Then("", c.keepIDs, fence)
	return keyWrite{Action: driver.Action{Key: b.Key, Write: driver.Write{Data: data, Cond: driver.IfMatch(b.ETag), Meta: m.String()}}, meta: m}
}

// over is the write of data over b with the write's fencing token.
func (e *engine) over(b version, data []byte) keyWrite { return e.c.over(b, data, e.fence) }

// deleteOf is the delete of key with If-Match etag.
func deleteOf(key string, etag ETag) keyWrite {
	return keyWrite{Action: driver.Action{Key: key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etag)}}}
}
