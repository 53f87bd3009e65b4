package memstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

// The sweeper of expired documents (etagstore.Expiry, Store.Sweep and
// SweepEvery) on memstore: 10,000 refresh-versus-sweep races, each
// worker's pairs over a memstore of its own (a fresh one every 100
// pairs); two and four sweepers at once; sweeps through lost answers and
// 503s (storetest.FaultyBackend); SweepEvery with and without a lock;
// the sweep's cutoff, to the instant. -short runs 1,000 pairs. See
// storetest.SweepRig.
func sweepRig(t *testing.T) storetest.SweepRig {
	r := storetest.SweepRig{
		New:   func(*testing.T) driver.Backend { return memstore.New(nil) },
		Pairs: 10_000, Workers: 8, Docs: 2_000,
		Faulty: func(_ *testing.T, f storetest.Faults) (driver.Backend, driver.Backend, func() map[string]int) {
			b := memstore.New(nil)
			fb := storetest.NewFaultyBackend(b, f)
			return fb, b, fb.Counts
		},
	}
	if testing.Short() {
		r.Pairs, r.Docs = 1_000, 400
	}
	return r
}

func TestSweepRaces(t *testing.T) { sweepRig(t).Races(t) }
func TestSweepSweepers(t *testing.T) {
	r := sweepRig(t)
	t.Run("Two", func(t *testing.T) { r.Sweepers(t, 2) })
	t.Run("Four", func(t *testing.T) { r.Sweepers(t, 4) })
}
func TestSweepFaults(t *testing.T)   { sweepRig(t).Faults(t) }
func TestSweepEvery(t *testing.T)    { sweepRig(t).Every(t) }
func TestSweepBadInput(t *testing.T) { sweepRig(t).BadInput(t) }
func TestSweepCutoff(t *testing.T)   { sweepRig(t).Cutoff(t) }

// The fault case again over a memstore shaped as blobs are (no entries,
// no Commit: Sweep lists the documents and deletes each one with
// Backend.Delete), through storetest.FaultyBackend, whose lost answers
// come back as a transport error or, as after an SDK's retry, as the
// retry's answer marked driver.ErrAmbiguous.
func TestSweepFaultsEntryless(t *testing.T) {
	r := sweepRig(t)
	r.Faulty = func(_ *testing.T, f storetest.Faults) (driver.Backend, driver.Backend, func() map[string]int) {
		b := memstore.New(nil)
		fb := storetest.NewFaultyBackend(b, f)
		return entryless{fb}, entryless{b}, fb.Counts
	}
	r.Faults(t)
}

// entryless is a backend that keeps no entries and commits nothing.
type entryless struct{ driver.Backend }

func (e entryless) Abilities() driver.Abilities {
	a := e.Backend.Abilities()
	a.Entries, a.Commit, a.CheckCommit = nil, nil, nil
	return a
}
