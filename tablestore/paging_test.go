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
