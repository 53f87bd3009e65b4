package etagstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// A transaction that writes nothing is validated, on a backend with
// PureChecks (memstore), by a commit of checks alone. That commit writes
// nothing, so a lost or throttled answer to it is checked again within
// the retry policy, with its backoff; only the policy's end (ErrUnavailable)
// or ctx (ctx.Err()) ends it, never ErrOutcomeUnknown.

// checkFault is what checkGate makes of one commit of checks alone.
type checkFault int

const (
	checkPasses    checkFault = iota // sent on to the backend
	checkLost                        // applied, then its answer lost (a connection reset)
	checkThrottled                   // refused unapplied: 503 ServerBusy
)

var errCheckLost = errors.New("test: connection reset after the check commit")

// checkGate wraps memstore and steers its commits of checks alone (every
// action a Check: the validation of a transaction that wrote nothing),
// and no other request: each takes the next fault of script (checkPasses
// once it is used up), after before runs, if set.
type checkGate struct {
	*memstore.Backend
	mu     sync.Mutex
	script []checkFault
	before func(n int) // n: the number of this check commit, from 1
	checks int         // commits of checks alone seen
}

func newCheckGate(script ...checkFault) *checkGate {
	return &checkGate{Backend: memstore.New(nil), script: script}
}

func (g *checkGate) Abilities() driver.Abilities {
	a := g.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		for _, ac := range actions {
			if !ac.Check {
				return commit(ctx, actions) // it writes: not the gate's
			}
		}
		g.mu.Lock()
		g.checks++
		n, fault := g.checks, checkPasses
		if len(g.script) > 0 {
			fault, g.script = g.script[0], g.script[1:]
		}
		before := g.before
		g.mu.Unlock()
		if before != nil {
			before(n)
		}
		switch fault {
		case checkLost:
			_, _ = commit(ctx, actions)
			return nil, errCheckLost
		case checkThrottled:
			return nil, fmt.Errorf("%w: test: 503 ServerBusy", driver.ErrNotApplied)
		}
		return commit(ctx, actions)
	}
	return a
}

// wantNoSentinel fails t if err matches any sentinel of the Store.
func wantNoSentinel(t *testing.T, what string, err error) {
	t.Helper()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			t.Errorf("%s = %v, matching %v; want no sentinel", what, err, s)
		}
	}
}

func (g *checkGate) checkCommits() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.checks
}

// sumAB is a read-only transaction: it reads a and b and records their sum
// and its runs.
type sumAB struct {
	runs, sum int
	err       error // what fn returns after its reads
}

func (r *sumAB) fn(tx *etagstore.Tx[counter]) error {
	r.runs++
	a, err := tx.Get("a")
	if err != nil {
		return err
	}
	b, err := tx.Get("b")
	if err != nil {
		return err
	}
	r.sum = a.N + b.N
	return r.err
}

// checkCommitStores are the Stores a read-only transaction runs in: on its
// own (its checks are the request of its own delivery), and in a batch of
// transactions (group commit: a member that wrote nothing is checked by
// itself, outside the batch's commit).
var checkCommitStores = []struct {
	name    string
	grouped bool
}{{"Alone", false}, {"Grouped", true}}

func newCheckGateStore(t *testing.T, g *checkGate, grouped bool, p etagstore.RetryPolicy) (*etagstore.Store[counter], *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	s := etagstore.New[counter](g, &etagstore.Options{Retry: &p, Clock: clock, CacheSize: -1, DisableGroupCommit: !grouped})
	for _, k := range []string{"a", "b"} {
		if _, err := s.Create(t.Context(), k, counter{N: 5}); err != nil {
			t.Fatal(err)
		}
	}
	return s, clock
}

// A lost and a throttled answer to the check commit are followed by
// another check, after a pause; when it holds the transaction returns nil
// and fn's result, fn having run once: the checks were sent again as
// they were.
func TestReadOnlyTransactCheckCommitLostThenHolds(t *testing.T) {
	for _, c := range checkCommitStores {
		t.Run(c.name, func(t *testing.T) {
			g := newCheckGate(checkLost, checkThrottled)
			s, clock := newCheckGateStore(t, g, c.grouped, etagstore.RetryPolicy{MaxAttempts: 10})
			var r sumAB
			docs, err := s.Transact(t.Context(), r.fn)
			if err != nil || len(docs) != 0 {
				t.Fatalf("Transact = %v, %v; want no documents, nil", docs, err)
			}
			if r.sum != 10 || r.runs != 1 {
				t.Errorf("fn saw a+b = %d in %d runs; want 10 in 1", r.sum, r.runs)
			}
			if n := g.checkCommits(); n != 3 {
				t.Errorf("%d check commits; want 3 (lost, throttled, held)", n)
			}
			if n := len(clock.sleeps); n != 2 {
				t.Errorf("%d pauses (%v); want one after each unanswered check", n, clock.sleeps)
			}
		})
	}
}

// The package-level Transact validates a read-only transaction the same
// way (default policy, system clock).
func TestReadOnlyTransactCheckCommitLostPackageLevel(t *testing.T) {
	g := newCheckGate(checkLost, checkThrottled, checkLost)
	s, _ := newCheckGateStore(t, g, false, etagstore.RetryPolicy{})
	var r sumAB
	if err := etagstore.Transact(t.Context(), func(tx *etagstore.Txn) error { return r.fn(s.In(tx)) }); err != nil {
		t.Fatalf("Transact = %v, want nil", err)
	}
	if r.sum != 10 || r.runs != 1 || g.checkCommits() != 4 {
		t.Errorf("fn saw a+b = %d in %d runs, %d check commits; want 10 in 1 run, 4 commits", r.sum, r.runs, g.checkCommits())
	}
}

// An error of fn is returned once its reads are found current: after a
// lost and a throttled answer, the check that holds. It matches no
// sentinel: it is fn's own.
func TestTransactErrorAfterLostCheckCommit(t *testing.T) {
	errOwn := errors.New("fn's own error")
	for _, c := range checkCommitStores {
		t.Run(c.name, func(t *testing.T) {
			g := newCheckGate(checkThrottled, checkLost)
			s, _ := newCheckGateStore(t, g, c.grouped, etagstore.RetryPolicy{MaxAttempts: 10})
			r := sumAB{err: errOwn}
			_, err := s.Transact(t.Context(), r.fn)
			if err != errOwn {
				t.Fatalf("Transact = %v, want fn's own error as it is", err)
			}
			wantNoSentinel(t, "fn's error", err)
			if r.runs != 1 || g.checkCommits() != 3 {
				t.Errorf("%d runs, %d check commits; want 1 run, 3 commits", r.runs, g.checkCommits())
			}
		})
	}
}

// A document read changes while the check commit's answer is lost: the
// check sent again fails, and fn runs again on the new version.
func TestReadOnlyTransactCheckLostThenStale(t *testing.T) {
	for _, c := range checkCommitStores {
		t.Run(c.name, func(t *testing.T) {
			g := newCheckGate(checkLost)
			s, _ := newCheckGateStore(t, g, c.grouped, etagstore.RetryPolicy{MaxAttempts: 10})
			other := etagstore.New[counter](g.Backend, nil) // another process, past the gate
			g.before = func(n int) {
				if n == 1 {
					if _, err := other.Update(context.Background(), "a", func(c *counter) error { c.N = 7; return nil }); err != nil {
						t.Error(err)
					}
				}
			}
			var r sumAB
			if _, err := s.Transact(t.Context(), r.fn); err != nil {
				t.Fatalf("Transact = %v, want nil", err)
			}
			if r.sum != 12 || r.runs != 2 {
				t.Errorf("fn saw a+b = %d in %d runs; want 12 (the new a) in 2", r.sum, r.runs)
			}
		})
	}
}

// Every check commit unanswered until the policy ends: ErrUnavailable
// alone (nothing was written: never ErrOutcomeUnknown), after as many
// check commits as the policy allows attempts, or, bounded by time only,
// once its time has passed: each unanswered check is followed by a
// pause, never by another at once.
func TestReadOnlyTransactCheckCommitUnansweredUntilPolicyEnds(t *testing.T) {
	for _, c := range checkCommitStores {
		for _, tc := range []struct {
			name  string
			fault checkFault
		}{{"Throttled", checkThrottled}, {"Lost", checkLost}} {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				script := make([]checkFault, 1000)
				for i := range script {
					script[i] = tc.fault
				}
				g := newCheckGate(script...)
				s, _ := newCheckGateStore(t, g, c.grouped, etagstore.RetryPolicy{MaxAttempts: 5})
				var r sumAB
				_, err := s.Transact(t.Context(), r.fn)
				wantOnly(t, "Transact", err, etagstore.ErrUnavailable)
				if n := g.checkCommits(); n != 5 || r.runs != 1 {
					t.Errorf("%d check commits in %d runs of fn; want 5 (MaxAttempts) in 1", n, r.runs)
				}

				g = newCheckGate(script...)
				s, clock := newCheckGateStore(t, g, c.grouped, etagstore.RetryPolicy{MaxElapsedTime: time.Second})
				start := clock.Now()
				_, err = s.Transact(t.Context(), r.fn)
				wantOnly(t, "Transact bounded by time", err, etagstore.ErrUnavailable)
				// The backoff stops once the next pause's cap (at most
				// MaxInterval, 250 ms by default) would pass the second.
				if n, took := g.checkCommits(), clock.Now().Sub(start); n < 2 || n >= len(script) || took <= time.Second-250*time.Millisecond {
					t.Errorf("%d check commits over %v; want the policy's second to end them", n, took)
				}
			})
		}
	}
}

// A ctx that ends while the check commit goes unanswered ends the
// transaction with ctx.Err() itself, matching no sentinel.
func TestReadOnlyTransactCheckCommitCtxEnds(t *testing.T) {
	for _, c := range checkCommitStores {
		t.Run(c.name, func(t *testing.T) {
			g := newCheckGate(checkThrottled, checkLost, checkLost)
			s, _ := newCheckGateStore(t, g, c.grouped, etagstore.RetryPolicy{MaxAttempts: 10})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			g.before = func(n int) {
				if n == 2 {
					cancel()
				}
			}
			var r sumAB
			_, err := s.Transact(ctx, r.fn)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Transact = %v, want context.Canceled", err)
			}
			wantNoSentinel(t, "Transact", err)
			if n := g.checkCommits(); n != 2 {
				t.Errorf("%d check commits; want 2 (none after ctx ended)", n)
			}
		})
	}
}

// A panic of fn goes up once its reads are found current, after the
// check's lost answer: fn ran once.
func TestTransactPanicAfterLostCheckCommit(t *testing.T) {
	for _, c := range checkCommitStores {
		t.Run(c.name, func(t *testing.T) {
			g := newCheckGate(checkLost, checkThrottled)
			s, _ := newCheckGateStore(t, g, c.grouped, etagstore.RetryPolicy{MaxAttempts: 10})
			runs := 0
			got := func() (p any) {
				defer func() { p = recover() }()
				_, _ = s.Transact(t.Context(), func(tx *etagstore.Tx[counter]) error {
					runs++
					if _, err := tx.Get("a"); err != nil {
						return err
					}
					panic("fn's panic")
				})
				return nil
			}()
			if got != "fn's panic" || runs != 1 || g.checkCommits() != 3 {
				t.Errorf("panic %v after %d runs, %d check commits; want fn's panic after 1 run, 3 commits", got, runs, g.checkCommits())
			}
		})
	}
}
