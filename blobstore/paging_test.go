package blobstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

// TestPaging runs in parallel: it is the package's longest test after
// TestLeaseExpiry, which spends its 16 s waiting for a lease to expire,
// and paging depends on no clock.
func TestPaging(t *testing.T) {
	t.Parallel()
	storetest.RunPaging(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}
