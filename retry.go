package etagstore

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RetryPolicy bounds how often, and for how long, a Store's writes are
// tried (every write: Update, Save, Create, Replace, Upsert, Delete, table
// merges and batches). A write is tried again when it lost a race (HTTP
// 412, or a lost create race) and is built again on the new version
// (Update, Save, fenced writes, Merge); when the service refused it
// unapplied (503 ServerBusy); and when its answer was lost and a read
// proves it has not landed. The SDK's own pipeline does not retry writes
// (a blind retry could apply one twice).
//
// The delay before attempt n+1 is drawn uniformly from [0, cap) ("full
// jitter"), where cap grows exponentially from InitialInterval by a factor of
// 2 up to MaxInterval. A zero field takes its default.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts before giving up (with a
	// *ConflictError after lost races). Default: 10. 1 disables retries.
	MaxAttempts int
	// InitialInterval is the first backoff cap. Default: 4ms.
	InitialInterval time.Duration
	// MaxInterval is the largest backoff cap. Default: 250ms.
	MaxInterval time.Duration
	// MaxElapsedTime stops retrying once this much time has passed since
	// the first attempt. Default: 15s. Negative: no limit.
	MaxElapsedTime time.Duration
}

// defaultRetryPolicy is the policy used when Options.Retry is nil.
var defaultRetryPolicy = RetryPolicy{
	MaxAttempts:     10,
	InitialInterval: 4 * time.Millisecond,
	MaxInterval:     250 * time.Millisecond,
	MaxElapsedTime:  15 * time.Second,
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := defaultRetryPolicy
	if p.MaxAttempts > 0 {
		d.MaxAttempts = p.MaxAttempts
	}
	if p.InitialInterval > 0 {
		d.InitialInterval = p.InitialInterval
	}
	if p.MaxInterval > 0 {
		d.MaxInterval = p.MaxInterval
	}
	if p.MaxElapsedTime != 0 {
		d.MaxElapsedTime = p.MaxElapsedTime
	}
	if d.MaxInterval < d.InitialInterval {
		d.MaxInterval = d.InitialInterval
	}
	return d
}

// Clock is the time source of the retry loop. Tests inject a fake one so
// that retries run instantly and deterministically.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, returning ctx.Err() then.
	Sleep(ctx context.Context, d time.Duration) error
}

// systemClock is the real clock, the default Options.Clock.

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// next says what the retry loop does after an attempt.
type next uint8

const (
	stop       next = iota // done: return the attempt's error (nil or not)
	afterPause             // lost a race: try again after a jittered backoff
	now                    // try again at once (resolving a lost response)
	redo                   // start the attempt again at once: nothing was sent, it does not count
)

// step is one attempt of a retried operation. With afterPause or now, err
// is what is returned if no attempt is left.
type step func(ctx context.Context, attempt int) (next, error)

// retry is the one retry loop of the package; the engine (engine.go) runs
// every write's attempts in it. It returns the number of
// attempts made and the final error. A done ctx ends it with ctx.Err(),
// unwrapped, so errors.Is(err, context.Canceled) holds. warm > 0 starts the
// backoff warm doublings up (see contention).
func retry(ctx context.Context, p RetryPolicy, clock Clock, op step, warm int, o *observer, name string) (int, error) {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.InitialInterval,
		RandomizationFactor: 0, // full jitter is applied below
		Multiplier:          2,
		MaxInterval:         p.MaxInterval,
		MaxElapsedTime:      max(p.MaxElapsedTime, 0),
		Stop:                backoff.Stop,
		Clock:               clock,
	}
	b.Reset()
	for range warm {
		b.NextBackOff()
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return attempt - 1, err
		}
		then, err := op(ctx, attempt)
		if then == redo {
			attempt--
			continue
		}
		if then == stop || attempt >= p.MaxAttempts {
			return attempt, err
		}
		if then == now {
			continue
		}
		limit := b.NextBackOff()
		if limit == backoff.Stop {
			return attempt, err
		}
		delay := fullJitter(limit)
		o.retrying(ctx, name, attempt, delay, err)
		if err := clock.Sleep(ctx, delay); err != nil {
			return attempt, err
		}
	}
}

// fullJitter draws a delay uniformly from [0, limit).
func fullJitter(limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(limit)))
}

// contention remembers, per key, how hot a Store has found it lately: each
// write that lost a race warms the key one step (up to maxHeat), each that
// won at once cools it one step. A warm key's first backoff starts that many
// doublings up, so that writers — in this process and, since every process
// backs off alike, in others — spread out instead of colliding again, and
// cool keys keep the short first delay.
//
// Only warm keys take memory, and only while they are busy: heat lives in
// two generations of heatWindow each, and a key that loses no race for two
// windows is forgotten (cool again), so a process that touches millions of
// keys holds heat for the ones contended lately. Safe for concurrent use.
type contention struct {
	mu    sync.Mutex
	cur   map[string]int // warmed or looked at in this window
	old   map[string]int // the window before
	since time.Time      // when cur's window began
}

const (
	maxHeat    = 5
	heatWindow = time.Minute
)

func (c *contention) warmth(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.cur[key]; ok {
		return h
	}
	return c.old[key]
}

// current reports whether key is warm now: the windows are moved on to
// clock's time first (read only when some key is warm).
func (c *contention) current(key string, clock Clock) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) == 0 && len(c.old) == 0 {
		return false
	}
	c.turn(clock.Now())
	if h, ok := c.cur[key]; ok {
		return h > 0
	}
	return c.old[key] > 0
}

// learn records the outcome of a write of key that took attempts; clock
// tells the time (read only when some key is warm).
func (c *contention) learn(key string, attempts int, clock Clock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if attempts <= 1 && len(c.cur) == 0 && len(c.old) == 0 {
		return // nothing warm: nothing to cool, no clock read
	}
	c.turn(clock.Now())
	h, ok := c.cur[key]
	if !ok {
		h = c.old[key]
		delete(c.old, key)
	}
	switch {
	case attempts > 1:
		h = min(h+1, maxHeat)
	case h > 0:
		h--
	}
	if h == 0 {
		delete(c.cur, key)
		return
	}
	if c.cur == nil {
		c.cur = map[string]int{}
	}
	c.cur[key] = h
}

// turn starts a new window when the current one is over; two windows
// after its last lost race a key is gone.
func (c *contention) turn(now time.Time) {
	switch {
	case c.since.IsZero():
		c.since = now
	case now.Sub(c.since) >= 2*heatWindow:
		c.cur, c.old, c.since = nil, nil, now // idle for a whole window: all cool
	case now.Sub(c.since) >= heatWindow:
		c.cur, c.old, c.since = nil, c.cur, now
	}
}
