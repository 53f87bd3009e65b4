package turns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/heat"
	"github.com/etagstore/etagstore/internal/meta"
)

// waitedKey is a key written by other processes, as a waiting write sees
// it: each read returns the next stored version of a script (the last one
// once the script is out) and takes a send of clock. A write is refused
// (412) while the script has versions left, or when its If-Match is not
// the stored version; then it lands.
type waitedKey struct {
	driver.Backend
	clock   *stepClock
	send    time.Duration
	read    time.Duration // how long a read takes (0: a send)
	script  []engine.Version
	reads   int
	writes  []driver.Write // every write sent, landed or not
	readsAt []int          // reads made before each write
}

func (k *waitedKey) stored() engine.Version {
	return k.script[min(k.reads, len(k.script))-1]
}

// waiterHooks are the hooks of a write of a waitedKey: its reads.
type waiterHooks struct {
	nopHooks
	k *waitedKey
}

func (h waiterHooks) Read(context.Context, string) (engine.Version, error) {
	k := h.k
	if k.read == 0 {
		k.read = k.send
	}
	k.clock.now = k.clock.now.Add(k.read)
	k.reads++
	return k.stored(), nil
}

func (k *waitedKey) Write(_ context.Context, key string, w driver.Write) (driver.ETag, error) {
	k.clock.now = k.clock.now.Add(k.send)
	k.writes, k.readsAt = append(k.writes, w), append(k.readsAt, k.reads)
	if k.reads == 0 || k.reads < len(k.script) || w.Cond.ETag != k.stored().ETag {
		return "", fmt.Errorf("412: %w", driver.ErrConflict)
	}
	return "mine", nil
}

// versions are stored versions named by etag; a name starting with "end"
// is the last write of the turn of the Store named by its next character.
func versions(names ...string) []engine.Version {
	out := make([]engine.Version, len(names))
	for i, n := range names {
		m := meta.Fresh(n, 0)
		if strings.HasPrefix(n, "end") {
			m = m.Yielding(n[3:4])
		}
		m = meta.Parse(m.String())
		out[i] = engine.Version{Item: driver.Item{Key: "k", ETag: driver.ETag(n), Data: []byte(n), Meta: m.String()}, Meta: m, Exists: true, MetaKnown: true, Verified: true}
	}
	return out
}

// waitForKey runs one Update-like write of "k" from a stale copy, in a
// Store that knows the key's writers take turns (it has read turns' ends
// of Stores B, C and D: four processes) and that a send takes k.send, and
// returns its result. firstSend is how long the refused first send takes.
func waitForKey(t *testing.T, k *waitedKey, firstSend time.Duration) engine.Result {
	return waitForKeyAmong(t, k, firstSend, "B", "C", "D")
}

// waitForKeyAmong is waitForKey in a Store that has read turns' ends of
// the Stores named holders.
func waitForKeyAmong(t *testing.T, k *waitedKey, firstSend time.Duration, holders ...string) engine.Result {
	t.Helper()
	h := &Layer{}
	h.won("k", k.send, true, "", k.clock)
	h.rival("k", k.clock) // it lost the key
	for _, holder := range holders {
		h.turnEnded("k", holder, k.clock)
	}
	env := &engine.Env{Backend: k, Clock: k.clock, Heat: &heat.Heat{}, Contention: h, Hooks: waiterHooks{k: k},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
	stale := versions("stale")[0]
	stale.Verified = false
	plan := engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
		if base[0].ETag == "stale" {
			k.clock.now = k.clock.now.Add(firstSend - k.send)
		}
		return engine.Request{d.Over(base[0], []byte("x"))}, nil
	})
	d := engine.New(env, "update", engine.Based, []string{"k"}, plan, engine.Options{Start: []engine.Version{stale}, TakeTurns: true})
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A write that lost a race on a key whose writers take turns waits for a
// turn to end, and takes the key first if it has waited longest: at once
// when it has seen two turns end before this one, after one read more
// finding the key unchanged when it has seen one, two when none. With
// three Stores waiting, each class's write lands a read before the next's,
// inside the holder's pause (turnPause sends).
func TestHandOverInClassOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []string
		reads  int // before the write that lands
	}{
		{"seen two turns end", []string{"endB", "a", "endC", "b", "endD"}, 5},
		{"seen one", []string{"endC", "b", "endD"}, 3 + 1},
		{"seen none", []string{"b", "endD"}, 2 + 2},
		{"no turn's end: the key still", []string{"b", "c"}, 2 + 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
			k := &waitedKey{clock: clock, send: 13 * time.Millisecond, script: versions(tc.script...)}
			res := waitForKey(t, k, k.send)
			if len(k.writes) != 2 || k.readsAt[1] != tc.reads || res.Out[0].ETag != "mine" {
				t.Fatalf("writes %d after reads %v, want the refused one and one after %d reads", len(k.writes), k.readsAt, tc.reads)
			}
			if want := driver.ETag(tc.script[len(tc.script)-1]); k.writes[1].Cond.ETag != want {
				t.Errorf("wrote over %q, want %q", k.writes[1].Cond.ETag, want)
			}
			if want := handoverClasses * k.send; time.Duration(tc.reads-len(tc.script))*k.send >= want && strings.HasPrefix(tc.script[len(tc.script)-1], "end") {
				t.Errorf("after the turn's end it read %d times: its write misses the holder's pause of %v", tc.reads-len(tc.script), want)
			}
		})
	}
}

// A waiting write counts the Stores ahead of it among those whose turns'
// ends its Store read lately: of two processes, the one waiting has none
// ahead and takes the key at once when the holder's turn ends; of three,
// the one that has seen the other waiter's turn end has none ahead.
func TestHandOverCountsTheStoresAhead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holders []string
		script  []string
		reads   int
	}{
		{"two processes", []string{"B"}, []string{"b", "endB"}, 2},
		{"three, first in line", []string{"B", "C"}, []string{"endC", "b", "endB"}, 3},
		{"three, second", []string{"B", "C"}, []string{"b", "endB"}, 2 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
			k := &waitedKey{clock: clock, send: 13 * time.Millisecond, script: versions(tc.script...)}
			waitForKeyAmong(t, k, k.send, tc.holders...)
			if len(k.writes) != 2 || k.readsAt[1] != tc.reads {
				t.Errorf("writes after reads %v, want the refused one and one after %d", k.readsAt, tc.reads)
			}
		})
	}
}

// A waiting write's class also grows with the time it has waited: one
// that lost its first race two and a half turns ago writes at once on a
// turn's end it is the first to see.
func TestHandOverClassByTime(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	k := &waitedKey{clock: clock, send: 13 * time.Millisecond, script: versions("b", "endD")}
	waitForKey(t, k, 3*cycle(k.send))
	if k.readsAt[1] != 2 {
		t.Errorf("wrote after %d reads, want 2: at once on the turn's end", k.readsAt[1])
	}
}

// A waiting write reads for two turns' time at most: a key that keeps
// changing without a turn's end (a writer that does not mark them) is
// written anyway, and a write that loses after waiting waits for the next
// turn without a backoff.
func TestHandOverWaitsTwoTurnsAtMost(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 13 * time.Millisecond
	limit := int((handoverMaxWait*cycle(send) + send - 1) / send) // reads after the first
	var names []string
	for i := range limit + 2 {
		names = append(names, fmt.Sprint("v", i))
	}
	names = append(names, "endD")
	k := &waitedKey{clock: clock, send: send, script: versions(names...)}
	waitForKey(t, k, send)
	if len(k.writes) != 3 || k.readsAt[1] != limit+1 || k.readsAt[2] < len(names) || k.readsAt[2] > len(names)+handoverClasses-1 {
		t.Fatalf("writes after reads %v, want the refused one, one after %d reads, one on the turn's end (read %d)", k.readsAt, limit+1, len(names))
	}
	for _, d := range clock.slept {
		if d > 0 {
			t.Errorf("slept %v between attempts: a write waiting for its turn does not back off", clock.slept)
			break
		}
	}
}

// Reads faster than sends do not make a waiting write read faster: it
// reads once a send at most, so that waiting costs the service a request
// per send per waiting Store, whatever the backend.
func TestHandOverPacesReads(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	send := 13 * time.Millisecond
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprint("v", i))
	}
	k := &waitedKey{clock: clock, send: send, read: send / 13, script: versions(names...)}
	waitForKey(t, k, send)
	limit := int((handoverMaxWait*cycle(send) + send - 1) / send)
	if k.readsAt[1] > limit+2 { // the base read, one at once after it, then one a send
		t.Errorf("wrote after %d reads taking %v each, want at most %d: a read a send", k.readsAt[1], k.read, limit+2)
	}
}

// Where there are no turns to wait for, a lost race reads once and writes:
// no turn's end seen lately, or sends too fast for waiting to pay.
func TestNoHandOverWithoutTurns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		send    time.Duration
		turning bool
	}{
		{"no turn's end seen", 13 * time.Millisecond, false},
		{"fast sends", handoverMinSend / 2, true},
		{"the Store holds the key: its own write made the version read", 13 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
			k := &waitedKey{clock: clock, send: tc.send, script: versions("b")}
			h := &Layer{}
			wrote := driver.ETag("")
			if tc.name == "the Store holds the key: its own write made the version read" {
				wrote = "b"
			}
			h.won("k", tc.send, true, wrote, clock)
			h.rival("k", clock) // it lost a race
			if tc.turning {
				h.turnEnded("k", "B", clock)
			}
			env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: waiterHooks{k: k},
				Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
			stale := versions("stale")[0]
			stale.Verified = false
			plan := engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
				return engine.Request{d.Over(base[0], []byte("x"))}, nil
			})
			d := engine.New(env, "update", engine.Based, []string{"k"}, plan, engine.Options{Start: []engine.Version{stale}, TakeTurns: true})
			if _, err := d.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if k.reads != 1 || len(k.writes) != 2 {
				t.Errorf("%d reads, %d writes; want 1 read between the refused write and the one that lands", k.reads, len(k.writes))
			}
		})
	}
}

// rivalHolder is a Store that writes "k" from its copies and lost a race
// on it lately: its clock, heat and env (writes take 30 ms of clock), and
// the copy it starts from.
func rivalHolder() (*stepClock, *Layer, *engine.Env, engine.Version) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	h := &Layer{}
	h.rival("k", clock)
	env := &engine.Env{Backend: &throttleOnce{clock: clock}, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: nopHooks{},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
	cur := versions("e0")[0]
	cur.Verified = false
	return clock, h, env, cur
}

// overPlan writes "x" over the version it starts from.
var overPlan = engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
	return engine.Request{d.Over(base[0], []byte("x"))}, nil
})

// A Store that holds a key while it has rivals marks the last write of
// each turn, and only that write, and pauses after it before the next.
func TestTurnEndIsMarked(t *testing.T) {
	clock, _, env, cur := rivalHolder()
	marked, pauses, lastMarked := 0, 0, false
	for i := range 40 {
		slept := len(clock.slept)
		res, err := engine.New(env, "update", engine.Based, []string{"k"}, overPlan, engine.Options{Start: []engine.Version{cur}}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		paused := len(clock.slept) > slept
		if paused != lastMarked {
			t.Fatalf("write %d: paused %v after a write marked %v", i, paused, lastMarked)
		}
		m := meta.Parse(res.Out[0].Meta)
		if m.Yield != "" {
			marked++
		}
		if paused {
			pauses++
		}
		lastMarked = m.Yield != ""
		cur.ETag, cur.Meta, cur.Item.Meta = res.Out[0].ETag, m, res.Out[0].Meta
	}
	if marked < 3 || pauses < 3 {
		t.Errorf("%d turns' ends marked and %d pauses in 40 writes of 30 ms, want one every turn (%v)", marked, pauses, turnFloor)
	}
}

// A Store counts the other holders of a key whose turns' ends it read
// within holdersRemembered turns' time, at most maxHolders of them, and
// never itself: its own turn's end is no turn it waited through.
func TestHolders(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var h Layer
	h.won("k", 13*time.Millisecond, true, "", clock)
	for i := range maxHolders + 4 {
		h.turnEnded("k", fmt.Sprint("s", i), clock)
		clock.now = clock.now.Add(time.Millisecond)
	}
	if n := h.holders("k", clock); n != maxHolders {
		t.Errorf("%d holders after %d named, want %d", n, maxHolders+4, maxHolders)
	}
	clock.now = clock.now.Add(holdersRemembered * cycle(13*time.Millisecond))
	h.turnEnded("k", "late", clock)
	if n := h.holders("k", clock); n != 1 {
		t.Errorf("%d holders %v later, want the one read since", n, holdersRemembered*cycle(13*time.Millisecond))
	}
	own := versions("endX")[0]
	own.Meta.Yield = h.name()
	w := h.Enter(&engine.Env{Clock: clock}, engine.Based, true).(*write)
	if w.endsTurn(own) || !w.endsTurn(versions("endX")[0]) {
		t.Error("a Store's own turn's end counted, or another's not")
	}
}

// A key deleted while a write waits for its turn has no holder to hand it
// over: the write stops waiting at the read that finds it missing.
func TestHandOverStopsAtDeletion(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_700_000_000, 0)}
	k := &waitedKey{clock: clock, send: 13 * time.Millisecond, script: versions("b", "c")}
	k.script = append(k.script, engine.Version{Item: driver.Item{Key: "k"}, Verified: true, Missing: driver.ErrNotFound})
	plan := engine.PlanFunc(func(d *engine.Delivery, base []engine.Version) (engine.Request, error) {
		if !base[0].Exists {
			return nil, base[0].Missing
		}
		return engine.Request{d.Over(base[0], []byte("x"))}, nil
	})
	h := &Layer{}
	h.won("k", k.send, true, "", clock)
	h.rival("k", clock)
	h.turnEnded("k", "B", clock)
	env := &engine.Env{Backend: k, Clock: clock, Heat: &heat.Heat{}, Contention: h, Hooks: waiterHooks{k: k},
		Policy: engine.Policy{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: -1}}
	stale := versions("stale")[0]
	stale.Verified = false
	d := engine.New(env, "update", engine.Based, []string{"k"}, plan, engine.Options{Start: []engine.Version{stale}, TakeTurns: true})
	if _, err := d.Run(context.Background()); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("err %v, want not found", err)
	}
	if k.reads != len(k.script) {
		t.Errorf("%d reads, want %d: none after the one that found the key missing", k.reads, len(k.script))
	}
}
