package reentry

import (
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
)

// This file notices a write made from inside the user code of another
// write of the same key: an Update whose mutate writes the key it is
// updating (a nested Update, Replace, Upsert, Delete, Save, ...). The
// nested write lands after the outer write's base was read, so the outer
// write can only lose its race to it, and each retry would run the
// mutate, and the nested write, again: a livelock that commits the
// nested write once per attempt until the retry policy ends. Instead the
// outer write ends when its user code returns, before it sends anything,
// with a *SelfWriteError, and the nested write has landed once.
//
// Which user code a write comes from is told by the goroutine's own
// stack, never by timing or by context: two goroutines writing one key,
// each inside its own mutate or not, are never taken for one nested in
// the other. Run holds a slot of a process-wide table while the user code
// runs and calls it below a chain of slotBits frames, each of link0 or
// link1, that spells the slot's number; a write that lands reads the
// chains on its own goroutine's stack (runtime.Callers), and so finds the
// runs it is nested in, exactly: a slot is held by the run whose chain is
// on the stack for as long as the chain is. A write made on another
// goroutine that the user code waits for is not seen, and is retried as
// any lost race; so is one made while every slot is held. A toolchain
// whose frames do not read as expected (see probeChains) sees no run at
// all, never a wrong one.

// Reentry is a Store's record of the user code running for its keys (an
// Update's mutate, through Run) and of the writes of those keys made from
// inside it. The zero Reentry is ready; a nil one notices nothing. Safe
// for concurrent use.
type Reentry struct {
	// open counts the runs open per hash of their keys: a write of a key
	// whose count is 0 is not nested in any, and reads no stack.
	open [openBuckets]atomic.Int32
	// anyOpen counts the runs open for any key (RunAny): while one is, a
	// write of every key reads the stack.
	anyOpen atomic.Int32
	// runs counts every run open: while none is, a write that lands
	// (NoteWritten) is nested in none, and looks no further.
	runs atomic.Int32
}

const openBuckets = 256

var openSeed = maphash.MakeSeed()

func (r *Reentry) bucket(key string) *atomic.Int32 {
	return &r.open[maphash.String(openSeed, key)%openBuckets]
}

// userRun is one run of user code for key, holding a slot. Its fields after
// key are written only by the goroutine running it (a write nested in it
// runs on that goroutine), so they need no lock.
type userRun struct {
	r   *Reentry
	key string
	// The first write of key made from inside it that landed (empty:
	// none), and whether it only may have landed (its answer was lost and
	// not settled).
	by     string
	unsure bool
	// A run for any key (RunAny) and the keys written from inside it.
	any    bool
	wrote  []string
	buried bool      // the slot's run panicked; r is nil (see buried)
	until  time.Time // a buried slot's: when it may be claimed again
}

// buried returns what a slot holds after the user code of its run
// panicked (or called runtime.Goexit): the run's chain may stay on the
// goroutine's stack while a deferred function above it recovers, and a
// write made there would read the slot's number from it. So the slot is
// kept from other runs by a run of no Reentry, which matches no write,
// until the recovery is surely over (buriedFor).
func buried(now time.Time) *userRun { return &userRun{buried: true, until: now.Add(buriedFor)} }

// buriedFor is how long a slot stays buried: far longer than a deferred
// function that recovers runs, in any program that ends its requests.
const buriedFor = time.Minute

// slots are the runs open, by the number their chains spell.
var (
	slots    [1 << slotBits]atomic.Pointer[userRun]
	slotNext atomic.Uint32 // where a search for a free slot starts
)

// slotBits is the length of a chain: 4096 runs open at once, process-wide;
// a run that finds every slot held runs without one, unseen (a write of
// its key from inside it is then retried as any lost race).
const slotBits = 12

// SelfWriteError ends a write whose user code (Op's: an Update's mutate)
// wrote Key itself, by a nested write (By) that landed, or may have
// (Unsure). It matches driver.ErrInvalidInput, and no other sentinel.
type SelfWriteError struct {
	Op, Key, By string
	Unsure      bool
}

func (e *SelfWriteError) Error() string {
	landed, code, rule := "committed", "mutate", "must only compute *T"
	if e.Unsure {
		landed = "may have committed"
	}
	switch e.Op {
	case "Save":
		code = "merge" // Save's MergeFunc
	case "Transact":
		code, rule = "fn", "must write only through tx"
	}
	return fmt.Sprintf("%v: %s %q: %s wrote its own key (a nested %s %s), which would beat this %s on every retry; %s %s",
		driver.ErrInvalidInput, e.Op, e.Key, code, e.By, landed, e.Op, code, rule)
}

// Unwrap makes errors.Is(err, driver.ErrInvalidInput) true.
func (e *SelfWriteError) Unwrap() error { return driver.ErrInvalidInput }

// Run runs f, the user code of a write named op of key (an Update's
// mutate), on the calling goroutine, and returns f's error; or, when f
// returned nil but a write of key made from inside f landed (or may
// have), a *SelfWriteError. A panic in f goes on up the stack.
func (r *Reentry) Run(op, key string, f func() error) error {
	if r == nil {
		return f()
	}
	ru := &userRun{r: r, key: key}
	err := r.run(ru, r.bucket(key), f)
	if err == nil && ru.by != "" {
		err = &SelfWriteError{Op: op, Key: key, By: ru.by, Unsure: ru.unsure}
	}
	return err
}

// RunAny runs f, the user code of a write whose keys f decides (a
// transaction's fn), as Run does, and returns f's error; or, when a write
// made from inside f through r's Store landed (or may have) on one of the
// keys own returns once f has returned (its own keys), a
// *SelfWriteError, whatever f returned. A panic in f goes on up the
// stack.
func (r *Reentry) RunAny(op string, f func() error, own func() []string) error {
	if r == nil {
		return f()
	}
	ru := &userRun{r: r, any: true}
	err := r.run(ru, &r.anyOpen, f)
	if len(ru.wrote) > 0 {
		for _, key := range own() {
			if slices.Contains(ru.wrote, key) {
				return &SelfWriteError{Op: op, Key: key, By: ru.by, Unsure: ru.unsure}
			}
		}
	}
	return err
}

// run runs f below the chain of a slot held by ru, counted open in open.
func (r *Reentry) run(ru *userRun, open *atomic.Int32, f func() error) error {
	slot, ok := claim(ru)
	if !ok {
		return f()
	}
	open.Add(1)
	r.runs.Add(1) // before f: a write nested in it, on this goroutine, sees it
	returned := false
	defer func() {
		open.Add(-1)
		r.runs.Add(-1)
		if !returned { // f panicked: its chain may outlive this call on the stack
			slots[slot].Store(buried(time.Now()))
			return
		}
		slots[slot].Store(nil)
	}()
	err := tagged(slot, f)
	returned = true
	return err
}

// claim takes a free slot for ru: an empty one, or one buried long enough.
func claim(ru *userRun) (uint32, bool) {
	start := slotNext.Add(1)
	var now time.Time
	for i := range uint32(len(slots)) {
		slot := (start + i) % uint32(len(slots))
		cur := slots[slot].Load()
		if cur != nil && cur.buried {
			if now.IsZero() {
				now = time.Now()
			}
			if now.Before(cur.until) {
				continue
			}
		} else if cur != nil {
			continue
		}
		if slots[slot].CompareAndSwap(cur, ru) {
			return slot, true
		}
	}
	return 0, false
}

// Inside reports whether the calling goroutine runs inside user code that
// Run runs for key, or RunAny for any key: a write of key made now would
// be nested in it.
func (r *Reentry) Inside(key string) bool {
	if r == nil || r.bucket(key).Load() == 0 && r.anyOpen.Load() == 0 {
		return false
	}
	found := false
	r.nestedIn([]string{key}, func(*userRun) { found = true })
	return found
}

// InsideAny reports whether the calling goroutine runs inside user code
// that Run runs for any key of r: a write whose keys are not known yet (a
// transaction's) made now may be nested in it.
func (r *Reentry) InsideAny() bool {
	if r == nil {
		return false
	}
	open := r.anyOpen.Load() > 0
	for i := range r.open {
		open = open || r.open[i].Load() > 0
	}
	if !open {
		return false
	}
	for _, slot := range onStack() {
		if ru := slots[slot].Load(); ru != nil && ru.r == r {
			return true
		}
	}
	return false
}

// landed records that the write named op of keys landed (unsure: may
// have), on the calling goroutine: the runs of r for its keys that the
// goroutine runs inside are marked.
func (r *Reentry) landed(op string, keys []string, unsure bool) {
	if r == nil {
		return
	}
	r.nestedIn(keys, func(ru *userRun) {
		if ru.by == "" || ru.unsure && !unsure {
			ru.by, ru.unsure = op, unsure
		}
		if ru.any {
			ru.wrote = append(ru.wrote, keys...)
		}
	})
}

// nestedIn calls mark for each run of r for one of keys that the calling
// goroutine runs inside.
func (r *Reentry) nestedIn(keys []string, mark func(*userRun)) {
	open := r.anyOpen.Load() > 0
	for _, key := range keys {
		if r.bucket(key).Load() > 0 {
			open = true
			break
		}
	}
	if !open {
		return
	}
	for _, slot := range onStack() {
		if ru := slots[slot].Load(); ru != nil && ru.r == r && (ru.any || slices.Contains(keys, ru.key)) {
			mark(ru)
		}
	}
}

// NoteWritten records, after a delivery named op ended with err, what it
// wrote (see landed): the keys written by the request that landed, or
// every key of one whose answer was lost unsettled. The engine calls it
// for every delivery (engine.Env.Reentry); a transaction over several
// Stores tells the others' itself.
func (r *Reentry) NoteWritten(op string, keys []string, res engine.Result, err error) {
	if r == nil || r.runs.Load() == 0 { // no run is open: none to mark
		return
	}
	switch {
	case err == nil && len(res.Sent) > 0:
		var buf [4]string
		wrote := buf[:0]
		for _, w := range res.Sent {
			if !w.Check {
				wrote = append(wrote, w.Key)
			}
		}
		r.landed(op, wrote, false)
	case errors.Is(err, driver.ErrOutcomeUnknown):
		r.landed(op, keys, true)
	}
}

// tagged calls f below a chain of slotBits frames spelling slot, its bits
// from the lowest, outermost, up: link0 for a 0, link1 for a 1.
func tagged(slot uint32, f func() error) error {
	if slot&1 == 0 {
		return link0(slot>>1, slotBits-1, f)
	}
	return link1(slot>>1, slotBits-1, f)
}

// link0 and link1 are the frames of tagged's chain: n more to go, then f.
// They are alike but for their name: a frame is told by the function its
// return address is in.
//
//go:noinline
func link0(bits uint32, n int, f func() error) error {
	switch {
	case n == 0:
		return f()
	case bits&1 == 0:
		return link0(bits>>1, n-1, f)
	}
	return link1(bits>>1, n-1, f)
}

//go:noinline
func link1(bits uint32, n int, f func() error) error {
	switch {
	case n == 0:
		return f()
	case bits&1 == 0:
		return link0(bits>>1, n-1, f)
	}
	return link1(bits>>1, n-1, f)
}

// frameKind is what a return address in a chain is: its bit, and whether
// it is the innermost frame, the one that called f.
type frameKind struct {
	pc    uintptr
	bit   uint32
	calls bool // it called f
}

// chainFrames are the return addresses a chain's frames can hold (six:
// in link0 and link1, the calls of link0, link1 and f), found by probing
// chains at start-up; none when the stack does not read as expected.
var chainFrames = probeChains()

// probeChains runs chains of two frames with every pair of bits and
// reads their return addresses from inside f.
func probeChains() []frameKind {
	var found []frameKind
	for bits := range uint32(4) {
		var pcs [2]uintptr
		call := func() error {
			runtime.Callers(2, pcs[:]) // skip Callers and this function: the innermost link first
			return nil
		}
		if bits&1 == 0 {
			_ = link0(bits>>1, 1, call)
		} else {
			_ = link1(bits>>1, 1, call)
		}
		for _, k := range []frameKind{{pc: pcs[0], bit: bits >> 1, calls: true}, {pc: pcs[1], bit: bits & 1}} {
			if k.pc == 0 {
				return nil
			}
			j := slices.IndexFunc(found, func(f frameKind) bool { return f.pc == k.pc })
			switch {
			case j < 0:
				found = append(found, k)
			case found[j] != k:
				return nil // one address read as two frames: do not trust the stack
			}
		}
	}
	if len(found) != 6 {
		return nil
	}
	return found
}

// kindOf returns what pc is in a chain; ok is false for any other frame.
func kindOf(pc uintptr) (frameKind, bool) {
	for _, k := range chainFrames {
		if k.pc == pc {
			return k, true
		}
	}
	return frameKind{}, false
}

// onStack returns the slots spelled by the chains on the calling
// goroutine's stack, innermost first.
func onStack() []uint32 {
	if len(chainFrames) == 0 {
		return nil
	}
	var pcs [64]uintptr
	var found []uint32
	var slot uint32
	bit := -1 // the bit the next frame of a chain being read spells; -1: none
	for skip := 2; ; skip += len(pcs) {
		n := runtime.Callers(skip, pcs[:])
		for _, pc := range pcs[:n] {
			k, ok := kindOf(pc)
			switch {
			case ok && k.calls: // the innermost frame of a chain: its highest bit
				slot, bit = k.bit<<(slotBits-1), slotBits-2
			case ok && bit >= 0:
				slot |= k.bit << bit
				bit--
			default:
				bit = -1 // not a chain, or one cut short
				continue
			}
			if bit < 0 {
				found = append(found, slot)
			}
		}
		if n < len(pcs) {
			return found
		}
	}
}
