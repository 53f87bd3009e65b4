// Package retry is the one retry loop of the delivery engine
// (internal/engine): it runs a write's attempts and decides when the next
// one runs — at once, or after a jittered backoff — within a Policy, on
// an injectable Clock. What an attempt is, and what its answer means, is
// the engine's; the loop knows only what each attempt says comes next.
package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy bounds a write's attempts: the Store's RetryPolicy with its
// defaults filled in.
type Policy struct {
	MaxAttempts     int           // 0: no count, time only
	InitialInterval time.Duration // the first backoff cap
	MaxInterval     time.Duration // the largest backoff cap
	MaxElapsedTime  time.Duration // negative: no limit
}

// Clock is the time source of the retry loop.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, returning ctx.Err() then.
	Sleep(ctx context.Context, d time.Duration) error
}

// Next says what the retry loop does after an attempt.
type Next uint8

const (
	Stop       Next = iota // done: return the attempt's error (nil or not)
	AfterLoss              // lost a race: try again after a jittered backoff, sooner the longer the write has waited
	AfterWait              // lost a race after waiting for the key (engine.Contender.Answered): try again at once, within the policy's time
	AfterPause             // refused unapplied (throttled): try again after a jittered backoff
	AtOnce                 // try again at once (resolving a lost response)
	Redo                   // start the attempt again at once: nothing was sent, it does not count
)

// Step is one attempt. With AfterLoss, AfterPause or AtOnce, err is what
// is returned if no attempt is left.
type Step func(ctx context.Context, attempt int) (Next, error)

// Hooks hear the loop's events (the engine's Hooks are ones).
type Hooks interface {
	// Attempted reports every attempt that counts, as it ends: its number,
	// its error (nil: it succeeded) and the delay before the next (0: at
	// once, or none).
	Attempted(ctx context.Context, attempt int, err error, delay time.Duration)
	// Retrying reports the pause before attempt+1, after err.
	Retrying(ctx context.Context, op string, attempt int, delay time.Duration, err error)
}

// Loop is one write's run of attempts: its policy, clock and hooks, and
// how it starts.
type Loop struct {
	Policy Policy
	Clock  Clock
	Hooks  Hooks
	Op     string // the operation, in Hooks.Retrying
	// Made attempts were made elsewhere: the first is Made+1, and they
	// count toward MaxAttempts.
	Made int
	// Warm > 0 starts the backoff cap Warm doublings up (internal/heat).
	Warm int
	// Shrink, after a lost race, may lower the cap limit (took: the last
	// attempt; waited: since the loop began); nil: none.
	Shrink func(limit, took, waited time.Duration) time.Duration
}

// Run is the one retry loop: it runs attempt until it stops or no
// attempt is left, and returns how many it made and the final error. A
// done ctx ends it with ctx.Err(), unwrapped, so errors.Is(err,
// context.Canceled) holds. The delay before attempt n+1 is drawn
// uniformly from [0, cap) ("full jitter"), cap growing by 2 from
// InitialInterval to MaxInterval.
func (l Loop) Run(ctx context.Context, attempt Step) (int, error) {
	p := l.Policy
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.InitialInterval,
		RandomizationFactor: 0, // full jitter is applied below
		Multiplier:          2,
		MaxInterval:         p.MaxInterval,
		MaxElapsedTime:      max(p.MaxElapsedTime, 0),
		Stop:                backoff.Stop,
		Clock:               l.Clock,
	}
	b.Reset()
	for range l.Warm {
		b.NextBackOff()
	}
	for n := l.Made + 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return n - 1, err
		}
		began := l.Clock.Now()
		then, err := attempt(ctx, n)
		if then == Redo {
			n--
			continue
		}
		if then == Stop || p.MaxAttempts > 0 && n >= p.MaxAttempts {
			l.Hooks.Attempted(ctx, n, err, 0)
			return n, err
		}
		if then == AtOnce {
			l.Hooks.Attempted(ctx, n, err, 0)
			continue
		}
		limit := b.NextBackOff()
		if limit == backoff.Stop {
			l.Hooks.Attempted(ctx, n, err, 0)
			return n, err
		}
		if then == AfterLoss && l.Shrink != nil {
			limit = l.Shrink(limit, l.Clock.Now().Sub(began), b.GetElapsedTime())
		}
		delay := fullJitter(limit)
		if then == AfterWait {
			delay = 0
		}
		l.Hooks.Attempted(ctx, n, err, delay)
		l.Hooks.Retrying(ctx, l.Op, n, delay, err)
		if err := l.Clock.Sleep(ctx, delay); err != nil {
			return n, err
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
