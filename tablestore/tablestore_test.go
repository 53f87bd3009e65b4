package tablestore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	})
}

// A Store of an older type keeps the properties a newer type wrote, each
// with its type.
func TestExtraMembersKept(t *testing.T) {
	storetest.RunExtra(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	})
}

func TestExactlyOnceUnderFaults(t *testing.T) {
	storetest.RunFaults(t, func(t *testing.T, f storetest.Faults) (driver.Backend, func() map[string]int) {
		proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), f)
		return tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "docs"}), proxy.Counts
	})
}

func TestMissingTable(t *testing.T) {
	storetest.RunMissingResource(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.MissingTable(t), &tablestore.Options{Partition: "docs"})
	}, "table")
}
