package tablestore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// The sweeper of expired documents (etagstore.Expiry, Store.Sweep and
// SweepEvery) on tables over Azurite: 300 refresh-versus-sweep races,
// each worker's pairs in a partition of one table of their own
// (Options.Partition); two and four sweepers at once, and sweeps through
// the fault proxy (10% of the answers lost after the commit, 5% 503s,
// reads too), over a table whose partitions are scopes of their own (no
// Options.Partition: Sweep lists due entries across them); SweepEvery
// with and without a lock; the sweep's cutoff, to the instant.
// ETAGSTORE_SOAK=1 runs 10,000 pairs, -short 60. See storetest.SweepRig.
func sweepRig(t *testing.T) storetest.SweepRig {
	r := storetest.SweepRig{
		New:   func(t *testing.T) driver.Backend { return tablestore.New(azuritetest.NewTable(t), nil) },
		Pairs: 300, Workers: 16, Docs: 150,
		Faulty: sweepFaulty,
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
	c := azuritetest.NewTable(t)
	r.Pair = func(_ *testing.T, i int) driver.Backend {
		return tablestore.New(c, &tablestore.Options{Partition: fmt.Sprintf("w%03d", i)})
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

// sweepFaulty is a table without Options.Partition through a fault
// proxy, and the same table straight to Azurite.
func sweepFaulty(t *testing.T, f storetest.Faults) (driver.Backend, driver.Backend, func() map[string]int) {
	target := azuritetest.Host(t, "Table")
	proxy := storetest.StartFaultProxy(t, target, f)
	cs := azuritetest.ConnectionString(t)
	direct, err := aztables.NewServiceClientFromConnectionString(cs, &aztables.ClientOptions{ClientOptions: azuritetest.Options})
	if err != nil {
		t.Fatal(err)
	}
	via, err := aztables.NewServiceClientFromConnectionString(strings.Replace(cs, target, proxy.URL(), 1), &aztables.ClientOptions{ClientOptions: azuritetest.FastRetries})
	if err != nil {
		t.Fatal(err)
	}
	name := azuritetest.Name("t")
	if _, err := direct.CreateTable(t.Context(), name, nil); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := direct.DeleteTable(ctx, name, nil); err != nil {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	return tablestore.New(via.NewClient(name), nil), tablestore.New(direct.NewClient(name), nil), proxy.Counts
}
func TestSweepCutoff(t *testing.T) { sweepRig(t).Cutoff(t) }
