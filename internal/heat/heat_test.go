package heat

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// manualClock is a Clock whose time moves only when the test moves it.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time                                   { return c.now }
func (c *manualClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A million keys, each contended once and then left idle, leave almost
// nothing behind once two windows have passed: per-key heat is bounded by
// the keys contended lately, not by every key the process ever saw.
func TestContentionForgetsIdleKeys(t *testing.T) {
	const keys = 1_000_000
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var c Heat
	before := heapInUse()
	for i := range keys {
		c.Learn(fmt.Sprintf("key-%07d", i), 2, clock) // lost one race
	}
	if got := c.Warmth("key-0000042"); got != 1 {
		t.Fatalf("a key that lost a race has warmth %d, want 1", got)
	}
	held := heapInUse()
	clock.now = clock.now.Add(2 * heatWindow)
	c.Learn("another", 1, clock) // any later write rotates the windows
	after := heapInUse()
	t.Logf("heap: %d MB before, %d MB with %d warm keys, %d KB after they idled", before>>20, held>>20, keys, after>>10)
	if after > before && after-before > 5<<20 {
		t.Errorf("heap grew by %d bytes after the keys went idle, want < 5 MB", after-before)
	}
	if got := c.Warmth("key-0000042"); got != 0 {
		t.Errorf("an idle key kept warmth %d", got)
	}
}

// A key that keeps losing races stays warm across windows, up to maxHeat,
// and cools one step per write that wins at once.
func TestContentionKeepsHotKeysWarm(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var c Heat
	for range 20 {
		c.Learn("hot", 3, clock)
		clock.now = clock.now.Add(heatWindow / 2)
	}
	if got := c.Warmth("hot"); got != maxHeat {
		t.Fatalf("a key losing races for 10 windows has warmth %d, want %d", got, maxHeat)
	}
	c.Learn("hot", 1, clock)
	if got := c.Warmth("hot"); got != maxHeat-1 {
		t.Errorf("after one uncontended write warmth %d, want %d", got, maxHeat-1)
	}
}
