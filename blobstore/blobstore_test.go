package blobstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}

// A Store of an older type keeps the members a newer type wrote.
func TestExtraMembersKept(t *testing.T) {
	storetest.RunExtra(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
	})
}

func TestExactlyOnceUnderFaults(t *testing.T) {
	storetest.RunFaults(t, func(t *testing.T, f storetest.Faults) (driver.Backend, func() map[string]int) {
		proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Blob"), f)
		return blobstore.New(azuritetest.NewContainerVia(t, proxy.URL()), &blobstore.Options{Prefix: "docs/"}), proxy.Counts
	})
}

func TestMissingContainer(t *testing.T) {
	storetest.RunMissingResource(t, func(t *testing.T) driver.Backend {
		return blobstore.New(azuritetest.MissingContainer(t), &blobstore.Options{Prefix: "docs/"})
	}, "container")
}
