package tablestore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Indexes without Options.Partition: a unique value holds per partition,
// and values passed to GetBy and ListBy carry it ("b1/ship it"). Run runs
// the same cases with a Partition (one scope).
func TestIndexesByPartition(t *testing.T) {
	storetest.RunIndexes(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), nil)
	})
}
