package memstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

// Documents that expire (etagstore.Expiry): every read path hides them at
// their instant, writes replace them, Sweep deletes them with their
// entries.
func TestExpiry(t *testing.T) {
	storetest.RunExpiry(t, func(t *testing.T) driver.Backend { return memstore.New(nil) })
}
