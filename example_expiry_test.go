package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// exampleClock is a clock the example moves by hand (Options.Clock): Now
// is what it was set to, and Sleep moves it on by d at once.
type exampleClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *exampleClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *exampleClock) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}

// Advance moves the clock on by d.
func (c *exampleClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sessions expire 30 minutes after they were last seen: reads hide an
// expired session at once, by the Store's clock, and Sweep deletes it.
func ExampleExpiry() {
	type Session struct {
		User     string
		LastSeen time.Time
	}
	ctx := context.Background()
	clock := &exampleClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	sessions := etagstore.New[Session](memstore.New(nil), &etagstore.Options{Clock: clock},
		etagstore.Expiry(func(s Session) time.Time { return s.LastSeen.Add(30 * time.Minute) })) // zero time = never

	_, err := sessions.Create(ctx, "s1", Session{User: "alice", LastSeen: clock.Now()})
	if err != nil {
		panic(err)
	}
	d, err := sessions.Get(ctx, "s1")
	fmt.Println(d.Value.User, d.Expires.Format(time.TimeOnly), err)

	clock.Advance(30 * time.Minute) // the instant it expires
	_, err = sessions.Get(ctx, "s1")
	fmt.Println(errors.Is(err, etagstore.ErrNotFound))

	// Sweep deletes it once it has been expired for Options.ExpirySkew
	// (5 seconds by default) by the sweeper's clock.
	clock.Advance(5 * time.Second)
	n, err := sessions.Sweep(ctx)
	fmt.Println(n, err)
	// Output:
	// alice 09:30:00 <nil>
	// true
	// 1 <nil>
}
