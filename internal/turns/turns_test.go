package turns

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/heat"
	"github.com/etagstore/etagstore/internal/meta"
	"github.com/etagstore/etagstore/internal/outcome"
)

// The first write from a copy after an idle spell does not pause: the run
// before it is over, and others had the whole spell (with a rival seen
// lately, and for a lone writer).
func TestTurnsEndWithIdleSpells(t *testing.T) {
	const send = 30 * time.Millisecond
	for _, rival := range []bool{true, false} {
		clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
		var h Layer
		if rival {
			h.rival("k", clock) // a lost race
		}
		sendRun(&h, clock, "k", 3, send) // 3 back-to-back wins
		idle := time.Second              // rival mode: < turnMemory sends
		if !rival {
			idle = 10 * time.Second // lone writer
		}
		clock.now = clock.now.Add(idle)
		if p, _ := h.pause("k", clock); p > 0 {
			t.Errorf("rival=%v: after 3 sends and %v idle, the next write pauses %v", rival, idle, p)
		}
	}
}

// manualClock is a Clock whose time moves only when the test moves it.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time                                   { return c.now }
func (c *manualClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// stepClock moves only when slept on, or when the test backend moves it.
type stepClock struct {
	now   time.Time
	slept []time.Duration
}

func (c *stepClock) Now() time.Time { return c.now }
func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

// throttleOnce is a backend whose writes take 30 ms of clock and whose
// first write, if throttle, is refused unapplied (503).
type throttleOnce struct {
	driver.Backend
	clock    *stepClock
	throttle bool
	n        int
}

func (b *throttleOnce) Write(_ context.Context, key string, w driver.Write) (driver.ETag, error) {
	b.clock.now = b.clock.now.Add(30 * time.Millisecond)
	if b.throttle {
		b.throttle = false
		return "", fmt.Errorf("503: %w", driver.ErrNotApplied)
	}
	b.n++
	return driver.ETag(fmt.Sprintf("e%d", b.n)), nil
}

// nopHooks are hooks for a write that never reads.
type nopHooks struct{}

func (nopHooks) Read(context.Context, string) (engine.Version, error)        { panic("no read") }
func (nopHooks) StaleCopy(string, driver.ETag)                               {}
func (nopHooks) Conflict(context.Context)                                    {}
func (nopHooks) Lost(context.Context, string, string, outcome.Verdict)       {}
func (nopHooks) Retrying(context.Context, string, int, time.Duration, error) {}
func (nopHooks) Attempted(context.Context, int, error, time.Duration)        {}

// A throttled write retried is no sign of a rival: a Store writing a key
// alone from its copies does not start taking turns after a 503 (30
// writes: no pause, throttled once or not).
func TestThrottlingIsNoRival(t *testing.T) {
	for _, throttled := range []bool{false, true} {
		clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
		be := &throttleOnce{clock: clock, throttle: throttled}
		env := &engine.Env{Backend: be, Clock: clock, Heat: &heat.Heat{}, Hooks: nopHooks{},
			Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
		cur := engine.Version{Item: driver.Item{Key: "k", ETag: "e0"}, Exists: true, MetaKnown: true, Meta: meta.Fresh("a", 0)}
		pauses := 0
		for range 30 {
			plan := engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
				return engine.Request{d.Over(base[0], []byte("x"))}, nil
			})
			slept := len(clock.slept)
			res, err := engine.New(env, "update", engine.Based, []string{"k"}, plan, engine.Options{Start: []engine.Version{cur}}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Attempts == 1 {
				pauses += len(clock.slept) - slept // no retry: a sleep is a turn's pause
			}
			cur.ETag, cur.Meta = res.Out[0].ETag, meta.Parse(res.Out[0].Meta)
		}
		if pauses > 0 {
			t.Errorf("throttled once=%v: a lone writer paused %d times in 30 writes", throttled, pauses)
		}
	}
}
