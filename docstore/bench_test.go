package docstore

import (
	"testing"

	"gocloud.dev/docstore/drivertest"
	"gocloud.dev/docstore/memdocstore"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// BenchmarkMemdocstore is the baseline: the Go CDK's own in-memory driver.
func BenchmarkMemdocstore(b *testing.B) {
	coll, err := memdocstore.OpenCollection(drivertest.KeyField, nil)
	if err != nil {
		b.Fatal(err)
	}
	drivertest.RunBenchmarks(b, coll)
}

func BenchmarkMemory(b *testing.B) {
	coll, err := OpenCollection(memstore.New(nil), drivertest.KeyField, nil)
	if err != nil {
		b.Fatal(err)
	}
	drivertest.RunBenchmarks(b, coll)
}

func BenchmarkTable(b *testing.B) {
	coll, err := OpenCollection(tablestore.New(azuritetest.NewTable(b), &tablestore.Options{Partition: "bench"}), drivertest.KeyField, nil)
	if err != nil {
		b.Fatal(err)
	}
	drivertest.RunBenchmarks(b, coll)
}

func BenchmarkBlob(b *testing.B) {
	coll, err := OpenCollection(blobstore.New(azuritetest.NewContainer(b), nil), drivertest.KeyField, nil)
	if err != nil {
		b.Fatal(err)
	}
	drivertest.RunBenchmarks(b, coll)
}
