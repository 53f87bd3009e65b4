package blobstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

func TestPaging(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}
