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

// Keys longer than the Azure services allow (MaxKeyLen 64 KiB) page too:
// the page token's bound is the backend's own.
func TestPagingLongKeys(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) driver.Backend { return memstore.New(&memstore.Options{MaxKeyLen: 64 << 10}) })
}
