package engine

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

// next says what the retry loop does after an attempt.
type next uint8

const (
	stop       next = iota // done: return the attempt's error (nil or not)
	afterLoss              // lost a race: try again after a jittered backoff, sooner the longer the write has waited
	afterWait              // lost a race after waiting for the key (Contender.Answered): try again at once, within the policy's time
	afterPause             // refused unapplied (throttled): try again after a jittered backoff
	now                    // try again at once (resolving a lost response)
	redo                   // start the attempt again at once: nothing was sent, it does not count
)

// step is one attempt. With afterLoss, afterPause or now, err is what is
// returned if no attempt is left.
type step func(ctx context.Context, attempt int) (next, error)

// retry is the one retry loop: it runs a delivery's attempts and returns
// how many it made and the final error. A done ctx ends it with
// ctx.Err(), unwrapped, so errors.Is(err, context.Canceled) holds. The
// delay before attempt n+1 is drawn uniformly from [0, cap) ("full
// jitter"), cap growing by 2 from InitialInterval to MaxInterval; warm > 0
// starts it warm doublings up (see Heat). After a lost race, shrink (nil:
// none) may lower the cap (Contender.Backoff). The first attempt is
// made+1: made were made elsewhere.
func (env *Env) retry(ctx context.Context, attempt step, made, warm int, op string, shrink func(limit, took, waited time.Duration) time.Duration) (int, error) {
	p := env.Policy
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.InitialInterval,
		RandomizationFactor: 0, // full jitter is applied below
		Multiplier:          2,
		MaxInterval:         p.MaxInterval,
		MaxElapsedTime:      max(p.MaxElapsedTime, 0),
		Stop:                backoff.Stop,
		Clock:               env.Clock,
	}
	b.Reset()
	for range warm {
		b.NextBackOff()
	}
	for n := made + 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return n - 1, err
		}
		began := env.Clock.Now()
		then, err := attempt(ctx, n)
		if then == redo {
			n--
			continue
		}
		if then == stop || p.MaxAttempts > 0 && n >= p.MaxAttempts {
			env.Hooks.Attempted(ctx, n, err, 0)
			return n, err
		}
		if then == now {
			env.Hooks.Attempted(ctx, n, err, 0)
			continue
		}
		limit := b.NextBackOff()
		if limit == backoff.Stop {
			env.Hooks.Attempted(ctx, n, err, 0)
			return n, err
		}
		if then == afterLoss && shrink != nil {
			limit = shrink(limit, env.Clock.Now().Sub(began), b.GetElapsedTime())
		}
		delay := fullJitter(limit)
		if then == afterWait {
			delay = 0
		}
		env.Hooks.Attempted(ctx, n, err, delay)
		env.Hooks.Retrying(ctx, op, n, delay, err)
		if err := env.Clock.Sleep(ctx, delay); err != nil {
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
