package blobstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/etagstore/etagstore/driver"
)

// keyQueue is one key's turn in a Locker. At most one caller has the turn
// at a time: the waiter asking the service for the lease, the Lock holding
// it, or the waiter it was just handed to. The other callers of Lock wait
// in line, in the order they came.
type keyQueue struct {
	key     string
	busy    bool          // someone has the turn
	waiters []*waiter     // in line, first come first
	tenure  time.Duration // of the next lease; 0: LockOptions.Tenure (only the turn's owner touches it)
}

// tenureOf returns how long the next lease is handed over.
func (q *keyQueue) tenureOf(o LockOptions) time.Duration {
	if q.tenure == 0 {
		return o.Tenure
	}
	return q.tenure
}

// adapt sets the next tenure after the first try that followed a release
// at the end of one: twice as long if the lease came straight back (no
// other process wanted it), from Tenure again if not.
func (q *keyQueue) adapt(o LockOptions, back bool) {
	if !back {
		q.tenure = o.Tenure
		return
	}
	q.tenure = min(2*q.tenureOf(o), max(o.PollMax, o.Tenure))
}

// waiter is one Lock call in line. Its turn is sent to grant (buffered,
// under Locker.mu), so it is there when the waiter gives up too late.
type waiter struct{ grant chan turn }

// turn is what a waiter in line is handed.
type turn struct {
	// sess is the lease the process holds, to write the waiter's own token
	// under; nil: the waiter must acquire a lease from the service.
	sess *session
	// yield says the lease was released at the end of its tenure: other
	// processes' waiters try first.
	yield bool
}

// enter takes the turn for key at once (w nil) if nobody has it, or puts
// the caller in line (w).
func (l *Locker) enter(key string) (q *keyQueue, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q = l.queue(key)
	if !q.busy {
		q.busy = true
		return q, nil
	}
	w = &waiter{grant: make(chan turn, 1)}
	q.waiters = append(q.waiters, w)
	if l.queued != nil {
		l.queued(key, len(q.waiters))
	}
	return q, w
}

// tryEnter takes the turn for key if nobody has it.
func (l *Locker) tryEnter(key string) (*keyQueue, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue(key)
	if q.busy {
		return nil, false
	}
	q.busy = true
	return q, true
}

// queue returns key's queue, made if need be; l.mu is held.
func (l *Locker) queue(key string) *keyQueue {
	q := l.queues[key]
	if q == nil {
		q = &keyQueue{key: key}
		l.queues[key] = q
	}
	return q
}

// await waits in line for w's turn until ctx is done: false then, and a
// turn handed over as it gave up is handed on.
func (l *Locker) await(ctx context.Context, q *keyQueue, w *waiter) (turn, bool) {
	select {
	case t := <-w.grant:
		if ctx.Err() == nil {
			return t, true
		}
		l.passDetached(ctx, q, t.sess)
		return turn{}, false
	case <-ctx.Done():
	}
	l.mu.Lock()
	i := slices.Index(q.waiters, w)
	if i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
	}
	l.mu.Unlock()
	if i < 0 { // handed its turn meanwhile
		l.passDetached(ctx, q, (<-w.grant).sess)
	}
	return turn{}, false
}

// pass hands the turn on: the lease s (nil: none) to the first waiter in
// line; with nobody in line, it ends s and frees the turn. A lease found
// lost is never handed on (the next waiter acquires anew), and one held for
// Tenure is released first, so that other processes get their turn. It
// returns the failure of a release.
func (l *Locker) pass(ctx context.Context, q *keyQueue, s *session) error {
	var err error
	yield := false
	if s != nil && (s.lost() != nil || time.Since(s.started) >= s.tenure) {
		yield = s.lost() == nil
		err, s = s.end(ctx), nil
	}
	for {
		l.mu.Lock()
		if len(q.waiters) > 0 {
			w := q.waiters[0]
			q.waiters[0] = nil
			q.waiters = q.waiters[1:]
			w.grant <- turn{sess: s, yield: yield}
			l.mu.Unlock()
			return err
		}
		if s == nil {
			q.busy = false
			delete(l.queues, q.key)
			l.mu.Unlock()
			return err
		}
		l.mu.Unlock()
		// Released with the turn kept: a caller coming meanwhile waits in
		// line for a free lease rather than being refused by ours.
		err, s = s.end(ctx), nil
	}
}

// passDetached is pass for a caller that gives up: a release still gets
// its own 10 s.
func (l *Locker) passDetached(ctx context.Context, q *keyQueue, s *session) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = l.pass(rctx, q, s)
}

// gaveUp is the error of a Lock whose ctx ended while it waited for another
// holder: it matches ErrLocked and ctx.Err().
func gaveUp(ctx context.Context, key string) error {
	return fmt.Errorf("%w: %q: gave up waiting: %w", driver.ErrLocked, key, ctx.Err())
}

// ctxDone is the error of a Lock or TryLock whose ctx ended before the
// lock was seen held: ctx.Err(), and no sentinel.
func ctxDone(ctx context.Context, key string) error {
	return fmt.Errorf("blobstore: lock %q: %w", key, ctx.Err())
}

// backoff paces the waiter that asks the service for a lease another
// process holds: jittered exponential delays from PollInitial to PollMax,
// unless that process said when it will release the lease for others
// (freeAt on the lock blob): then it tries again just after that, the
// sooner the longer it has waited, so that processes take turns about in
// the order they came.
type backoff struct {
	l     *Locker
	key   string
	since time.Time // when the waiting began
	delay time.Duration
}

func (l *Locker) newBackoff(key string) *backoff {
	return &backoff{l: l, key: key, since: time.Now(), delay: l.opts.PollInitial}
}

// next returns how long to wait after a refusal.
func (b *backoff) next(ctx context.Context) time.Duration {
	o := &b.l.opts
	if at, ok := b.l.freeAt(ctx, b.key); ok {
		// Due within PollMax, or due just now: the holder releases after
		// its hold in progress ends.
		if wait := time.Until(at); wait > -o.PollInitial && wait <= o.PollMax {
			b.delay = o.PollInitial
			waited := float64(time.Since(b.since))
			share := float64(o.Tenure) / (float64(o.Tenure) + waited)
			late := time.Duration(float64(o.PollInitial/2) * share * share)
			return max(wait, 0) + late + jitter(o.PollInitial/8)
		}
	}
	d := jitter(b.delay)
	b.delay = min(2*b.delay, o.PollMax)
	return d
}

// jitter returns a random duration in (0, d].
func jitter(d time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(max(d, 1)))) + 1
}

// sleep waits d, or until ctx is done: false then.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
