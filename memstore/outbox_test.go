package memstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

// The transactional outbox (etagstore.Outbox): atomic with the commit,
// in order, relayed at least once through crashes and lost answers.
func TestOutbox(t *testing.T) {
	storetest.RunOutbox(t, func(t *testing.T) driver.Backend { return memstore.New(nil) })
}

// The outbox under DefaultFaults: no event lost, reordered, or a ghost.
func TestOutboxUnderFaults(t *testing.T) {
	storetest.RunOutboxFaults(t, func(t *testing.T, f storetest.Faults) (driver.Backend, func() map[string]int) {
		fb := storetest.NewFaultyBackend(memstore.New(nil), f)
		return fb, fb.Counts
	})
}
