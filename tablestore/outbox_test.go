package tablestore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// The transactional outbox (etagstore.Outbox) on a table without
// Options.Partition: an event's partition is its documents' ("b1/"), and
// the relay keeps two partitions apart.
func TestOutbox(t *testing.T) {
	storetest.RunOutbox(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), nil)
	})
}

// The outbox through a proxy that loses 10% of the answers after the
// commit and answers 503 to 5% of the writes: no event lost, reordered,
// or a ghost.
func TestOutboxUnderFaults(t *testing.T) {
	storetest.RunOutboxFaults(t, func(t *testing.T, f storetest.Faults) (driver.Backend, func() map[string]int) {
		proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), f)
		return tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), nil), proxy.Counts
	})
}
