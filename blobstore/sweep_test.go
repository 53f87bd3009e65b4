package blobstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
)

// The sweeper of expired documents (etagstore.Expiry, Store.Sweep and
// SweepEvery) on blobs over Azurite, where a Store keeps no entries and
// Sweep lists the documents: 300 refresh-versus-sweep races, each
// worker's pairs under a prefix of one container of their own; two and
// four sweepers at once; sweeps through the fault proxy (10% of the
// answers lost after the request was applied, 5% 503s, reads too);
// SweepEvery with and without blobstore's Locker; the sweep's cutoff, to
// the instant. ETAGSTORE_SOAK=1 runs 10,000 pairs, -short 60. See
// storetest.SweepRig.
func sweepRig(t *testing.T) storetest.SweepRig {
	r := storetest.SweepRig{
		New: func(t *testing.T) driver.Backend {
			return blobstore.New(azuritetest.NewContainer(t), &blobstore.Options{Prefix: "docs/"})
		},
		Pairs: 300, Workers: 16, Docs: 100,
		Faulty: sweepFaulty,
		Locks: func(t *testing.T) (etagstore.Locker, etagstore.Locker) {
			c := azuritetest.NewContainer(t)
			a, err := blobstore.NewLocker(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := blobstore.NewLocker(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			return a, b
		},
	}
	if storetest.Soak() { // ETAGSTORE_SOAK=1: the 10,000 pairs
		r.Pairs = 10_000
	}
	if testing.Short() {
		r.Pairs, r.Docs = 60, 60
	}
	return r
}

func TestSweepRaces(t *testing.T) {
	r := sweepRig(t)
	c := azuritetest.NewContainer(t)
	r.Pair = func(_ *testing.T, i int) driver.Backend {
		return blobstore.New(c, &blobstore.Options{Prefix: fmt.Sprintf("w%03d/", i)})
	}
	r.Races(t)
}

func TestSweepSweepers(t *testing.T) {
	r := sweepRig(t)
	t.Run("Two", func(t *testing.T) { r.Sweepers(t, 2) })
	t.Run("Four", func(t *testing.T) { r.Sweepers(t, 4) })
}
func TestSweepFaults(t *testing.T)   { sweepRig(t).Faults(t) }
func TestSweepEvery(t *testing.T)    { sweepRig(t).Every(t) }
func TestSweepBadInput(t *testing.T) { sweepRig(t).BadInput(t) }

// sweepFaulty is a container through a fault proxy, and the same
// container straight to Azurite.
func sweepFaulty(t *testing.T, f storetest.Faults) (driver.Backend, driver.Backend, func() map[string]int) {
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Blob"), f)
	via := azuritetest.NewContainerVia(t, proxy.URL())
	svc, err := azblob.NewClientFromConnectionString(azuritetest.ConnectionString(t), &azblob.ClientOptions{ClientOptions: azuritetest.Options})
	if err != nil {
		t.Fatal(err)
	}
	direct := svc.ServiceClient().NewContainerClient(via.URL()[strings.LastIndex(via.URL(), "/")+1:])
	opts := &blobstore.Options{Prefix: "docs/"}
	return blobstore.New(via, opts), blobstore.New(direct, opts), proxy.Counts
}
func TestSweepCutoff(t *testing.T) { sweepRig(t).Cutoff(t) }
