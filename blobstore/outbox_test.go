package blobstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

// Blobs cannot commit an event with a document: every call of an Outbox
// over them is errors.ErrUnsupported.
func TestOutbox(t *testing.T) {
	storetest.RunOutbox(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}
