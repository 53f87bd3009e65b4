package storetest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// NewFaultyBackend returns an empty backend for one test whose writes pass
// through faults f, and a function reporting the faults injected so far.
type NewFaultyBackendFunc func(t *testing.T, f Faults) (driver.Backend, func() map[string]int)

// DefaultFaults are the faults of the exactly-once suite: 10% of write
// responses dropped after the server committed them, 5% of writes answered
// 503 without reaching the server.
var DefaultFaults = Faults{Seed: 1, DropAfterCommit: 0.10, Unavailable: 0.05}

// Soak reports whether the long version of the fault suite was asked for
// with ETAGSTORE_SOAK=1 (16 writers × 200 increments and more operations;
// the default is a short version for CI).
func Soak() bool { return os.Getenv("ETAGSTORE_SOAK") == "1" }

// RunFaults runs the exactly-once suite: under DefaultFaults, increments
// end exact, creates and deletes have exactly-once outcomes, and histories
// (with unknown outcomes modelled as such) are linearizable.
func RunFaults(t *testing.T, newBackend NewFaultyBackendFunc) {
	t.Helper()
	writers, each := 16, 40
	linClients, linOps := 8, 30
	if Soak() {
		writers, each, linClients, linOps = 16, 200, 6, 100
	}
	store := func(t *testing.T, f Faults) (*etagstore.Store[Page], func() map[string]int) {
		b, counts := newBackend(t, f)
		t.Cleanup(func() { t.Logf("faults injected: %v", counts()) })
		return etagstore.New[Page](b, withErrorLines(t, etagstore.Options{})), counts
	}
	t.Run("CounterExact", func(t *testing.T) {
		s, _ := store(t, DefaultFaults)
		faultyCounter(t, s, writers, each)
	})
	t.Run("CounterExactUngrouped", func(t *testing.T) {
		// Every Update its own write: many more lost responses to resolve.
		b, counts := newBackend(t, DefaultFaults)
		t.Cleanup(func() { t.Logf("faults injected: %v", counts()) })
		faultyCounter(t, etagstore.New[Page](b, withErrorLines(t, etagstore.Options{DisableGroupCommit: true})), writers, each)
	})
	t.Run("CounterExactMixedFaults", func(t *testing.T) {
		// Every kind of fault the proxy knows, at lower rates.
		s, _ := store(t, Faults{Seed: 2, DropAfterCommit: 0.05, HangAfterCommit: 0.02, Hang: 300 * time.Millisecond,
			ServerError: 0.03, ResetMidBody: 0.03, Unavailable: 0.03, Latency: time.Millisecond})
		faultyCounter(t, s, 8, each/2)
	})
	t.Run("CreateOnce", func(t *testing.T) {
		s, _ := store(t, DefaultFaults)
		faultyCreates(t, s)
	})
	t.Run("DeleteOnce", func(t *testing.T) {
		s, _ := store(t, DefaultFaults)
		faultyDeletes(t, s)
	})
	t.Run("TransfersExactlyOnce", func(t *testing.T) {
		// Transactions whose commits are lost or throttled: the total is
		// conserved and every transfer that returned success is applied
		// exactly once (a ledger document counts them in the same commits).
		s, _ := store(t, DefaultFaults)
		if !transacts(t, s) {
			return
		}
		transfers(t, s, 8, each/4, func(err error) bool { wantOneSentinel(t, err); return true })
	})
	for _, grouped := range []string{"", "Ungrouped"} {
		// Read-only transactions among transactions whose commits are
		// lost or throttled: every audit and snapshot returns nil. A
		// read-only transaction in a batch (group commit) is checked on
		// its own; ungrouped, by its own delivery.
		transactStore := func(t *testing.T) (*etagstore.Store[Page], bool) {
			b, counts := newBackend(t, DefaultFaults)
			t.Cleanup(func() { t.Logf("faults injected: %v", counts()) })
			s := etagstore.New[Page](b, withErrorLines(t, etagstore.Options{DisableGroupCommit: grouped != ""}))
			return s, transacts(t, s)
		}
		t.Run("TransfersWithReadOnlyAudits"+grouped, func(t *testing.T) {
			if s, ok := transactStore(t); ok {
				faultyTransfersWithAudits(t, s, 8, each/4, 4)
			}
		})
		t.Run("TransactionsLinearizable"+grouped, func(t *testing.T) {
			if s, ok := transactStore(t); ok {
				checkTransactionsLinearizable(t, s, linClients, linOps)
			}
		})
	}
	t.Run("Linearizable", func(t *testing.T) {
		s, _ := store(t, DefaultFaults) // the default Store: group commit on
		checkLinearizable(t, s, linClients, linOps, true)
	})
	t.Run("LinearizableUngrouped", func(t *testing.T) {
		b, counts := newBackend(t, DefaultFaults)
		t.Cleanup(func() { t.Logf("faults injected: %v", counts()) })
		s := etagstore.New[Page](b, withErrorLines(t, etagstore.Options{DisableGroupCommit: true}))
		checkLinearizable(t, s, linClients, linOps, true)
	})
}

// faultyCounter: every Update either succeeds — and is counted exactly
// once — or says its outcome is unknown; the final counter lies between the
// successes and the successes plus the unknowns (exact when there are none).
func faultyCounter(t *testing.T, s *etagstore.Store[Page], writers, each int) {
	ctx := t.Context()
	var ok, unknown atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := s.Update(ctx, "counter", func(p *Page) error { p.N++; return nil }, etagstore.CreateIfMissing())
				if err != nil {
					wantOneSentinel(t, err)
				}
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					unknown.Add(1)
				default:
					t.Errorf("Update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	d, err := readThrough(t, s, "counter")
	if err != nil {
		t.Fatal(err)
	}
	n, succ, unk := d.Value.N, ok.Load(), unknown.Load()
	t.Logf("%d×%d increments: %d succeeded, %d unknown; counter = %d", writers, each, succ, unk, n)
	if n < succ {
		t.Errorf("counter %d < %d successful increments: %d lost", n, succ, succ-n)
	}
	if n > succ+unk {
		t.Errorf("counter %d > %d successful + %d unknown increments: %d counted twice", n, succ, unk, n-succ-unk)
	}
	if succ+unk != int64(writers*each) {
		t.Errorf("%d outcomes for %d increments", succ+unk, writers*each)
	}
}

// readThrough reads key, retrying the transport failures that injected
// read faults may cause.
func readThrough(t *testing.T, s *etagstore.Store[Page], key string) (etagstore.Doc[Page], error) {
	t.Helper()
	var err error
	for range 5 {
		var d etagstore.Doc[Page]
		if d, err = s.Get(t.Context(), key); err == nil || errors.Is(err, etagstore.ErrNotFound) {
			return d, err
		}
	}
	return etagstore.Doc[Page]{}, err
}

// faultyCreates: 8 racers on each of 10 keys; exactly one Create per key
// succeeds (or is unknown), the rest get ErrExists, and the stored value is
// the winner's.
func faultyCreates(t *testing.T, s *etagstore.Store[Page]) {
	const keys, racers = 10, 8
	ctx := t.Context()
	type outcome struct{ won, exists, unknown int }
	var mu sync.Mutex
	outcomes := make([]outcome, keys)
	winner := make([]int64, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for r := range racers {
			wg.Go(func() {
				_, err := s.Create(ctx, fmt.Sprintf("c%d", k), Page{N: int64(100*k + r)})
				if err != nil {
					wantOneSentinel(t, err)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					outcomes[k].won++
					winner[k] = int64(100*k + r)
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					outcomes[k].unknown++
				case errors.Is(err, etagstore.ErrExists):
					outcomes[k].exists++
				default:
					t.Errorf("Create: %v", err)
				}
			})
		}
	}
	wg.Wait()
	for k, o := range outcomes {
		d, err := readThrough(t, s, fmt.Sprintf("c%d", k))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case o.won > 1:
			t.Errorf("key c%d: %d creates succeeded", k, o.won)
		case o.won == 1 && d.Value.N != winner[k]:
			t.Errorf("key c%d holds %d, the winner wrote %d", k, d.Value.N, winner[k])
		case o.won == 0 && o.unknown == 0:
			t.Errorf("key c%d exists but no create claims it: %+v", k, o)
		}
		if o.won+o.exists+o.unknown != racers {
			t.Errorf("key c%d: outcomes %+v", k, o)
		}
	}
	t.Logf("creates: %+v", outcomes)
}

// faultyDeletes: each of 40 documents is deleted once with its ETag; every
// Delete succeeds or says the document is gone but not by whom — none claims
// ErrNotFound or a conflict — and every document is gone.
func faultyDeletes(t *testing.T, s *etagstore.Store[Page]) {
	const docs = 40
	ctx := t.Context()
	etags := make([]etagstore.ETag, docs)
	for i := range docs {
		for {
			d, err := s.Upsert(ctx, fmt.Sprintf("d%d", i), Page{N: int64(i)})
			if err == nil {
				etags[i] = d.ETag
				break
			}
			if !errors.Is(err, etagstore.ErrOutcomeUnknown) {
				t.Fatal(err)
			}
		}
	}
	var ok, unknown atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < docs; i += 8 {
				err := s.Delete(ctx, fmt.Sprintf("d%d", i), etags[i])
				if err != nil {
					wantOneSentinel(t, err)
				}
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					unknown.Add(1)
				default:
					t.Errorf("Delete(d%d): %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	for i := range docs {
		if _, err := readThrough(t, s, fmt.Sprintf("d%d", i)); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("d%d after its delete: %v", i, err)
		}
	}
	t.Logf("deletes: %d succeeded, %d gone with unknown outcome", ok.Load(), unknown.Load())
}
