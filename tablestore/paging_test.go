package tablestore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

func TestPaging(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	})
}

// TestPagingAcrossPartitions runs the paging suite on a table without
// Options.Partition, each of its keys in a partition of its own (a row
// "r" under it), so that every listing and page is a query across
// partitions; and the key-order case on "PartitionKey/RowKey" keys whose
// partitions extend one another, in the order the Backend declares.
func TestPagingAcrossPartitions(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) driver.Backend {
		return storetest.KeySuffix(tablestore.New(azuritetest.NewTable(t), nil), "/r")
	})
	storetest.RunKeyOrder(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), nil)
	})
}
