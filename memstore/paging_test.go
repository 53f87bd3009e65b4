package memstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

func TestPaging(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) driver.Backend { return memstore.New(nil) })
}
