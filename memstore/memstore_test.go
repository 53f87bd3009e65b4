package memstore_test

import (
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) driver.Backend { return memstore.New(nil) })
}

func TestExactlyOnceUnderFaults(t *testing.T) {
	storetest.RunFaults(t, func(t *testing.T, f storetest.Faults) (driver.Backend, func() map[string]int) {
		fb := storetest.NewFaultyBackend(memstore.New(nil), f)
		return fb, fb.Counts
	})
}

// A Store of an older type keeps the members a newer type wrote.
func TestExtraMembersKept(t *testing.T) {
	storetest.RunExtra(t, func(t *testing.T) driver.Backend { return memstore.New(nil) })
}
