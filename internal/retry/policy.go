package retry

import (
	"context"
	"time"
)

// This file is what a Store is given when its options say nothing: the
// Policy's defaults and the system's Clock.

// Default is the Policy of a Store whose Options.Retry is nil.
var Default = Policy{
	InitialInterval: 4 * time.Millisecond,
	MaxInterval:     250 * time.Millisecond,
	MaxElapsedTime:  15 * time.Second,
}

// WithDefaults is p, a Store's RetryPolicy, with Default's value in each
// zero field (MaxAttempts stays 0: no count), and a MaxInterval no
// smaller than its InitialInterval.
func (p Policy) WithDefaults() Policy {
	d := Default
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

// System is the real clock, the default Options.Clock.
type System struct{}

func (System) Now() time.Time { return time.Now() }

func (System) Sleep(ctx context.Context, d time.Duration) error {
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
