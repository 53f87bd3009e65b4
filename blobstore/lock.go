package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// tokenKey is the lock blob's metadata entry holding the last fencing token
// handed out.
const tokenKey = "fencetoken"

// Fencing tokens are a hybrid logical clock: an acquisition's token is
// max(stored+1, now), stored the last token on the lock blob and now a clock
// reading in microseconds since the Unix epoch. Kept above the stored token,
// tokens grow with every acquisition whatever the clocks do. Bounded below
// by the clock, they also grow across the deletion of the lock blob (a
// cleanup job, a lifecycle rule), which takes the stored token with it: the
// next acquisition starts again at about now, above every earlier token as
// long as it comes later after the last acquisition before the deletion
// than the two acquirers' clocks disagree.
//
// The reading is the acquiring process's clock kept within the storage
// service's, the Date of the service's answer to the token read (whole
// seconds): raised to that Date, lowered to at most maxAhead past it. A
// correct clock stays as it is (the service answered between sending and
// receiving, within the second its Date names), unless the answer took
// more than a second; a wrong one is pulled in. So no process's clock runs
// the tokens more than maxAhead ahead of the service's clock, nor restarts
// them more than a second behind it: whatever the processes' clocks, a
// deleted lock blob restarts above every earlier token when re-acquired
// more than 3 s after the last acquisition before the deletion (plus any
// disagreement between the service's own clocks); with the processes'
// clocks synchronised, more than their skew after it.
//
// Why not a plain counter kept where deleting an idle lock blob cannot
// reset it: it would live in another object (the container's metadata, a
// table entity) that cleanup can delete just as well, costs a second write
// per acquisition, and still restarts at 1 when it goes. A clock needs no
// state at all to restart high.
//
// Tokens of the earlier scheme, a counter from 1, stay valid: they are far
// below any clock reading, so documents that recorded one accept the new
// tokens.

// maxAhead is how far past the Date of the service's answer a clock reading
// may be: that Date's second, and up to a second of round trip.
const maxAhead = 2 * time.Second

// LockOptions configure a Locker. Zero fields take their defaults.
type LockOptions struct {
	// Prefix is put before each lock's key to name its lock blob.
	// Default: "locks/".
	Prefix string
	// LeaseDuration is the lease period, 15 to 60 whole seconds: how long
	// a crashed holder keeps the lock. Default: 15s.
	LeaseDuration time.Duration
	// RenewInterval is how often the holder renews. Default: a third of
	// LeaseDuration.
	RenewInterval time.Duration
	// PollInitial and PollMax bound Lock's jittered exponential backoff
	// while another process holds the lock. Defaults: 25ms, and 1s or
	// PollInitial if that is longer. A PollMax below PollInitial is raised
	// to PollInitial: the backoff stays at PollInitial.
	PollInitial, PollMax time.Duration
	// Tenure is how long a lease this Locker acquired is handed from one
	// of its waiters to the next before it is released, so that waiters
	// in other processes get their turn. When this Locker's next waiter
	// takes the lease back at once (no other process wanted it), the next
	// tenure is twice as long, up to PollMax (or Tenure if longer); it
	// starts again from Tenure when another process takes its turn.
	// Default: 200ms.
	Tenure time.Duration
	// MeterProvider counts lock events (etagstore.lock.events: acquired,
	// renewed, lost, released) and records how long Lock, TryLock, Unlock
	// and the lease operations under them took
	// (etagstore.operation.duration). Default: the global provider.
	MeterProvider metric.MeterProvider
	// Logger receives a warning when a held lock is lost. Default: none.
	Logger *slog.Logger
	// TracerProvider makes one span of Lock, TryLock and Unlock, of each
	// lease operation under them (AcquireLease, RenewLease, ReleaseLease;
	// the background renewals link to the TryLock that acquired the lock),
	// and of a lock's loss (etagstore.LockLost), with the attributes of a
	// Store's spans. Default: the global provider.
	TracerProvider trace.TracerProvider
	// RecordKeys adds each lock's key to its spans (etagstore.key) and to
	// the warning of its loss, and lets error texts, which name the key,
	// into span statuses and logs. Keys can be personal data. Default:
	// false.
	RecordKeys bool
}

// Locker hands out distributed locks, one lease-backed lock blob per key,
// in one container. It is safe for concurrent use.
//
// The lock fixes the limits of the plain "lease as a lock" recipe: every
// lease is acquired with a fresh lease id; renewal runs in the background
// and checks every result, retrying transient failures; the lock's Context
// is cancelled and Lost is closed the moment the lease is definitely lost —
// or renewals have failed for so long that it may have expired; Unlock is
// idempotent; and each acquisition advances a fencing token stored on the
// lock blob, which the lock's Context carries to Store writes (see
// etagstore.WithFence), so a stale holder's late writes are refused with
// etagstore.ErrFenced. The token is bounded below by the clock, so it
// grows across the deletion of the lock blob too (see Lock.Token).
//
// Waiters of one Locker queue per key and take the lock in the order they
// called Lock: one of them at a time asks the service, and Unlock hands
// the lease to the next in line, which writes its own, greater fencing
// token under that lease (one request) before its Lock returns; a lease
// found lost is never handed over, its next waiter acquires anew. A lease
// is handed over for at most LockOptions.Tenure, then released. Waiters
// in other processes back off with jitter; a refused one reads when the
// holding process means to release (one request) and tries again then.
type Locker struct {
	c      *container.Client
	opts   LockOptions
	events lockEvents
	now    func() time.Time // the clock of fencing tokens

	mu     sync.Mutex
	queues map[string]*keyQueue    // the keys with a turn taken, or waiters
	queued func(key string, n int) // tests: a caller got in line, n-th; l.mu is held
}

// lockEvents counts what happens to a Locker's locks, and records its
// operations.
type lockEvents struct {
	counter                           metric.Int64Counter
	acquired, renewed, lost, released []metric.AddOption
	rec                               *telemetry.Recorder
}

func newLockEvents(o LockOptions) lockEvents {
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	rec := telemetry.NewRecorder(scope, "blobstore", telemetry.Providers{
		TracerProvider: o.TracerProvider, MeterProvider: o.MeterProvider, Logger: o.Logger, RecordKeys: o.RecordKeys,
	})
	c, _ := mp.Meter(scope).Int64Counter("etagstore.lock.events", metric.WithUnit("{event}"),
		metric.WithDescription("Lease lock events: acquired, renewed, lost (the lease expired, was broken or taken over), released."))
	event := func(name string) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("etagstore.event", name)))}
	}
	return lockEvents{counter: c, acquired: event("acquired"), renewed: event("renewed"), lost: event("lost"), released: event("released"), rec: rec}
}

// NewLocker returns a Locker keeping its lock blobs in c, which must exist.
// Nil opts means the defaults.
func NewLocker(c *container.Client, opts *LockOptions) (*Locker, error) {
	l := &Locker{c: c, now: time.Now, queues: map[string]*keyQueue{}}
	if opts != nil {
		l.opts = *opts
	}
	l.events = newLockEvents(l.opts)
	o := &l.opts
	if o.Prefix == "" {
		o.Prefix = "locks/"
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if _, err := leaseSeconds(o.LeaseDuration); err != nil || o.LeaseDuration == Infinite {
		return nil, fmt.Errorf("%w: LockOptions.LeaseDuration must be 15 to 60 whole seconds, not %v", etagstore.ErrInvalidInput, o.LeaseDuration)
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = o.LeaseDuration / 3
	}
	if o.RenewInterval >= o.LeaseDuration/2 {
		return nil, fmt.Errorf("%w: LockOptions.RenewInterval %v leaves no room for a failed renewal in a %v lease", etagstore.ErrInvalidInput, o.RenewInterval, o.LeaseDuration)
	}
	if o.PollInitial <= 0 {
		o.PollInitial = 25 * time.Millisecond
	}
	if o.PollMax <= 0 {
		o.PollMax = max(time.Second, o.PollInitial)
	}
	o.PollMax = max(o.PollMax, o.PollInitial)
	if o.Tenure <= 0 {
		o.Tenure = 200 * time.Millisecond
	}
	return l, nil
}

// Lock takes the lock for key, waiting until ctx is done while another
// holder has it: the error then matches both etagstore.ErrLocked and
// ctx.Err(). Callers of one Locker get the lock in the order they called
// Lock; while another process holds it, the first in line polls the
// service with jittered backoff.
//
// A ctx done before Lock saw the lock held (the key free in this Locker,
// and no answer from the service yet that another holds it) fails with
// ctx.Err() and no sentinel, as TryLock does: nothing says the lock is
// held. A key that is not a valid lock blob name matches
// etagstore.ErrInvalidKey; a service failure, the sentinel it maps to.
func (l *Locker) Lock(ctx context.Context, key string) (*Lock, error) {
	sctx, sp := l.events.rec.Begin(ctx, telemetry.OpLock, key)
	lk, err := l.lock(sctx, ctx, key)
	sp.End(err)
	return lk, err
}

// lock is Lock, whose tries are spans under ctx; the lock's Context derives
// from base, the caller's context.
func (l *Locker) lock(ctx, base context.Context, key string) (*Lock, error) {
	if err := l.checkKey(key); err != nil {
		return nil, err
	}
	q, w := l.enter(key)
	var t turn
	if w != nil {
		var ok bool
		if t, ok = l.await(ctx, q, w); !ok {
			return nil, gaveUp(ctx, key)
		}
	}
	if t.sess != nil {
		lk, err := l.handover(ctx, base, q, t.sess)
		if err == nil {
			return lk, nil
		}
		l.endDetached(ctx, t.sess) // lost, or its token unwritable: a fresh lease then
	}
	lk, err := l.poll(ctx, base, q, key, t.yield, w != nil)
	if err != nil {
		l.passDetached(ctx, q, nil)
	}
	return lk, err
}

// handover takes the lease the process holds, handed over by the last
// holder: it writes the next fencing token under it, one request, which
// fails if the lease was lost meanwhile.
func (l *Locker) handover(ctx, base context.Context, q *keyQueue, s *session) (*Lock, error) {
	if err := s.lost(); err != nil {
		return nil, err
	}
	if err := s.bump(ctx); err != nil {
		return nil, err
	}
	return s.hold(base, q, linkTo(ctx)), nil
}

// endDetached ends s for a caller whose ctx may be done.
func (l *Locker) endDetached(ctx context.Context, s *session) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = s.end(rctx)
}

// poll asks the service for a lease until it gets one or ctx is done; the
// caller has the turn. yield waits a little first, for other processes.
// held says the caller has seen the lock held (it waited in line behind
// another caller): a ctx that ends then gives up waiting (ErrLocked), one
// that ends before the lock was seen held is the ctx's error alone.
func (l *Locker) poll(ctx, base context.Context, q *keyQueue, key string, yield, held bool) (*Lock, error) {
	if yield && !sleep(ctx, l.opts.PollInitial/2+jitter(l.opts.PollInitial/2)) {
		return nil, gaveUp(ctx, key)
	}
	b := l.newBackoff(key)
	for {
		lk, err := l.tryLock(ctx, base, q, key)
		if yield {
			q.adapt(l.opts, err == nil)
			yield = false
		}
		if ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())) && lk == nil {
			if !held {
				return nil, ctxDone(ctx, key)
			}
			return nil, gaveUp(ctx, key)
		}
		if !errors.Is(err, etagstore.ErrLocked) {
			return lk, err
		}
		held = true
		if !sleep(ctx, b.next(ctx)) {
			return nil, gaveUp(ctx, key)
		}
	}
}

// TryLock takes the lock for key if it is free, or fails at once with
// etagstore.ErrLocked: without a request when a caller of this Locker
// holds or waits for it. With ctx already done (and the key free in this
// Locker) it sends nothing and fails with ctx.Err() and no sentinel, as
// Lock does. A key that is not a valid lock blob name matches
// etagstore.ErrInvalidKey; a service failure, the sentinel it maps to.
func (l *Locker) TryLock(ctx context.Context, key string) (*Lock, error) {
	if err := l.checkKey(key); err != nil {
		return nil, err
	}
	q, ok := l.tryEnter(key)
	if !ok {
		_, sp := l.events.rec.Begin(ctx, telemetry.OpTryLock, key)
		err := fmt.Errorf("%w: lock %q is held or awaited in this process", etagstore.ErrLocked, key)
		sp.End(err)
		return nil, err
	}
	lk, err := l.tryLock(ctx, ctx, q, key)
	if err != nil {
		l.passDetached(ctx, q, nil)
	}
	return lk, err
}

// checkKey refuses a key that makes no lock blob name.
func (l *Locker) checkKey(key string) error {
	if err := driver.CheckKey(key); err != nil {
		return err
	}
	return checkBlobName(l.opts.Prefix + key)
}

// tryLock is one try at the service, a TryLock span under ctx; the lock's
// Context derives from base, the caller's context. The caller has the turn.
func (l *Locker) tryLock(ctx, base context.Context, q *keyQueue, key string) (*Lock, error) {
	ctx, sp := l.events.rec.Begin(ctx, telemetry.OpTryLock, key)
	lk, err := l.acquire(ctx, base, q, key)
	sp.End(err)
	return lk, err
}

// acquire takes a fresh lease on key's lock blob if it is free, writes the
// next fencing token under it and starts its renewals.
func (l *Locker) acquire(ctx, base context.Context, q *keyQueue, key string) (*Lock, error) {
	if ctx.Err() != nil { // nothing tried: nothing is known of the lock
		return nil, ctxDone(ctx, key)
	}
	name := l.opts.Prefix + key
	bc := l.c.NewBlockBlobClient(name)
	ls, err := newBlobLease(bc, name, key, NewLeaseID(), l.events.rec) // a fresh id for every lease
	if err != nil {
		return nil, err
	}
	err = ls.Acquire(ctx, l.opts.LeaseDuration)
	if errors.Is(err, etagstore.ErrNotFound) {
		if err := createLockBlob(ctx, bc, name); err != nil {
			return nil, err
		}
		err = ls.Acquire(ctx, l.opts.LeaseDuration)
	}
	if err != nil {
		return nil, err
	}
	s := l.newSession(ctx, q, name, bc, ls)
	if err := s.firstToken(ctx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = ls.Release(rctx)
		return nil, err
	}
	go s.renewLoop(s.started)
	return s.hold(base, q, s.origin), nil
}

// createLockBlob makes the empty lock blob with If-None-Match: *, so racing
// creators never clobber one another (nor a token already counted). It
// carries the fencing token from the start, which is how a Store's List on
// the same container tells it is not a document.
func createLockBlob(ctx context.Context, bc *blockblob.Client, name string) error {
	zero := "0"
	_, err := bc.Upload(ctx, nopCloser{bytes.NewReader(nil)}, &blockblob.UploadOptions{
		Metadata:         map[string]*string{tokenKey: &zero},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: writeConditions(driver.Cond{Kind: driver.CondCreate})},
	})
	if err = driver.Sent(ctx, mapError("create lock", driver.CondCreate, name, err)); errors.Is(err, etagstore.ErrExists) {
		return nil // another creator won: fine
	}
	return err
}

// isLockBlob reports whether a blob's metadata marks it as a Locker's lock
// blob (it holds the fencing token).
func isLockBlob(md map[string]*string) bool {
	for k := range md {
		if strings.EqualFold(k, tokenKey) {
			return true
		}
	}
	return false
}

// nextToken returns the token following stored: max(stored+1, now), now in
// microseconds since the Unix epoch. now is the clock reading received,
// taken when the answer dated date (nil: no Date) arrived, kept within
// [date, date+maxAhead].
func nextToken(stored int64, received time.Time, date *time.Time) int64 {
	now := received
	if date != nil {
		switch hi := date.Add(maxAhead); {
		case now.Before(*date):
			now = *date
		case now.After(hi):
			now = hi
		}
	}
	return max(stored+1, now.UnixMicro())
}

// storedToken returns the fencing token in a lock blob's metadata; 0 if it
// has none, or none that parses.
func storedToken(md map[string]*string) int64 {
	for k, v := range md {
		if strings.EqualFold(k, tokenKey) && v != nil {
			token, _ := strconv.ParseInt(*v, 10, 64)
			return token
		}
	}
	return 0
}

// Lock is a held distributed lock. Its methods are safe for concurrent use.
type Lock struct {
	key    string
	sess   *session  // the lease it holds
	q      *keyQueue // whose turn it has
	token  int64
	events *lockEvents
	origin []trace.SpanStartOption // links the span of its loss to the span that took it

	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{} // closed when the lease is lost
	passed chan struct{} // closed when the turn went on after the loss

	mu       sync.Mutex
	err      error // why the lock was lost
	unlocked bool
}

// Key returns the key the lock is for.
func (lk *Lock) Key() string { return lk.key }

// Token returns the fencing token of this acquisition: greater than the
// token of every earlier acquisition of the same key. It is microseconds
// since the Unix epoch, kept above the token stored on the lock blob, so it
// stays greater when the lock blob was deleted in between (a cleanup job, a
// lifecycle rule) if this acquisition came later after the last one before
// the deletion than the clocks of the processes that made them disagree:
// their skew when synchronised, and whatever the clocks never more than
// 3 s on the storage service's clock, within a second or two of which each
// reading is kept.
// Where that fails, a document written under the earlier token refuses
// Store writes made with this lock's Context with etagstore.ErrFenced, and
// nothing is written. Tokens of earlier versions, a count from 1, are below
// every token handed out now.
func (lk *Lock) Token() int64 { return lk.token }

// LeaseID returns the id of the lease on the lock blob. A lease handed
// from one holder of a Locker to the next keeps its id; each holder has
// its own token.
func (lk *Lock) LeaseID() string { return lk.sess.lease.ID() }

// Context returns a context that is cancelled, with cause
// etagstore.ErrLockLost, the moment the lock is lost, and when it is
// unlocked. It carries the lock's fencing token: Store writes made with it
// are refused with etagstore.ErrFenced once a newer holder has written.
func (lk *Lock) Context() context.Context { return lk.ctx }

// Lost returns a channel closed the moment the lock is lost.
func (lk *Lock) Lost() <-chan struct{} { return lk.lost }

// Err returns nil while the lock is held (or was unlocked normally) and an
// error matching etagstore.ErrLockLost once it has been lost, including a
// loss that Unlock found (and returned).
func (lk *Lock) Err() error {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.err
}

func (lk *Lock) lose(err error) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.err != nil || lk.unlocked {
		return
	}
	lk.record(err)
	// The turn goes on now, not at Unlock: the next caller in line
	// acquires a fresh lease, and this lock's Unlock only reports the loss.
	go func() {
		defer close(lk.passed)
		lk.sess.l.passDetached(context.Background(), lk.q, lk.sess)
	}()
}

// lostAtUnlock records the loss that Unlock found as it released the
// lease (the turn has gone on already).
func (lk *Lock) lostAtUnlock(err error) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.err == nil {
		lk.record(err)
	}
}

// record makes err the lock's loss: Err, Lost, the Context's cause, and
// the loss's telemetry. lk.mu is held.
func (lk *Lock) record(err error) {
	lk.err = err
	close(lk.lost)
	lk.cancel(err)
	lk.events.counter.Add(context.Background(), 1, lk.events.lost...)
	rec := lk.events.rec
	rec.Event(context.Background(), telemetry.OpLockLost, lk.key, err, lk.origin...)
	rec.Logger().Warn("etagstore: lock lost", append(rec.KeyAttrs(lk.key), "error", rec.Describe(err))...)
}

// Unlock ends the hold: it cancels the lock's Context, then hands the
// lease to the next caller of this Locker waiting for the key, or, with
// none waiting (or the lease held for LockOptions.Tenure), releases it so
// another process can take the lock at once. It is idempotent: later calls
// return nil. If the lock had been lost, Unlock returns that error
// (matching etagstore.ErrLockLost): work done under it may have overlapped
// another holder's. That includes a loss Unlock finds itself: the release
// answered that another lease holds the lock blob, or that the lock blob
// is gone; Err then returns it too, and Lost is closed. A lease handed to
// the next caller in line is not released, so a loss not yet seen is
// found by that caller (which then acquires a fresh lease), not by Unlock.
// Another failure of the release matches the sentinel it maps to.
func (lk *Lock) Unlock(ctx context.Context) error {
	ctx, sp := lk.events.rec.Begin(ctx, telemetry.OpUnlock, lk.key)
	err := lk.unlock(ctx)
	sp.End(err)
	return err
}

func (lk *Lock) unlock(ctx context.Context) error {
	lk.mu.Lock()
	if lk.unlocked {
		lk.mu.Unlock()
		return nil
	}
	lk.unlocked = true
	lostErr := lk.err
	lk.mu.Unlock()
	lk.cancel(context.Canceled)
	s := lk.sess
	s.detach(lk)
	if lostErr != nil { // the turn went on when the loss was found
		<-lk.passed
		return lostErr
	}
	if err := s.l.pass(ctx, lk.q, s); err != nil {
		err = fmt.Errorf("%w (unlocking %q)", err, lk.key)
		if errors.Is(err, etagstore.ErrLockLost) {
			lk.lostAtUnlock(err) // counted as lost, not released
			return err
		}
		lk.events.counter.Add(ctx, 1, lk.events.released...)
		return err
	}
	lk.events.counter.Add(ctx, 1, lk.events.released...)
	return nil
}

// TryHold is TryLock as an etagstore.Locker takes a lock, so that a
// Locker keeps Store.SweepEvery and Outbox.Relay to one process at a time.
func (l *Locker) TryHold(ctx context.Context, name string) (etagstore.Held, error) {
	lk, err := l.TryLock(ctx, name)
	if err != nil {
		return nil, err
	}
	return lk, nil
}

var _ etagstore.Locker = (*Locker)(nil)
