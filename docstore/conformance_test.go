package docstore

import (
	"context"
	"encoding/json"
	"testing"

	"gocloud.dev/docstore"
	"gocloud.dev/docstore/driver"
	"gocloud.dev/docstore/drivertest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// harness makes drivertest's collections on one kind of backend.
type harness struct {
	t *testing.T
	// backend returns a fresh, empty backend; partitioned asks for one
	// whose keys are "PARTITION/KEY" (tables: no fixed partition).
	backend func(t *testing.T, partitioned bool) edriver.Backend
	atomic  drivertest.AtomicWritesSupportKind
}

func (h *harness) MakeCollection(_ context.Context, kind drivertest.CollectionKind) (driver.Collection, error) {
	switch kind {
	case drivertest.TwoKey:
		// The partition is the game: atomic writes within one game.
		return newCollection(h.backend(h.t, true), "", drivertest.HighScoreKey, &Options{PartitionField: "Game"})
	case drivertest.AltRev:
		return newCollection(h.backend(h.t, false), drivertest.KeyField, nil, &Options{RevisionField: drivertest.AlternateRevisionField})
	}
	return newCollection(h.backend(h.t, false), drivertest.KeyField, nil, nil)
}

func (h *harness) BeforeDoTypes() []any    { return nil }
func (h *harness) BeforeQueryTypes() []any { return nil }

func (h *harness) RevisionsEqual(rev1, rev2 any) bool { return rev1 == rev2 }

func (h *harness) AtomicWritesKind() drivertest.AtomicWritesSupportKind { return h.atomic }

func (h *harness) Close() {}

func memBackend(*testing.T, bool) edriver.Backend { return memstore.New(nil) }

// tableBackend is a fresh table in Azurite: one fixed partition, or keys
// "PartitionKey/RowKey".
func tableBackend(t *testing.T, partitioned bool) edriver.Backend {
	opts := &tablestore.Options{Partition: "docs"}
	if partitioned {
		opts = nil
	}
	return tablestore.New(azuritetest.NewTable(t), opts)
}

func blobBackend(t *testing.T, _ bool) edriver.Backend {
	return blobstore.New(azuritetest.NewContainer(t), nil)
}

func maker(backend func(*testing.T, bool) edriver.Backend, atomic drivertest.AtomicWritesSupportKind) drivertest.HarnessMaker {
	return func(_ context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{t: t, backend: backend, atomic: atomic}, nil
	}
}

// memstore commits any keys at once (Transact); tables one partition
// (an entity group transaction); blobs none.
func TestConformanceMemory(t *testing.T) {
	drivertest.RunConformanceTests(t, maker(memBackend, drivertest.MultiplePartitions), jsonCodecTester{}, []drivertest.AsTest{asMemory})
}

func TestConformanceTable(t *testing.T) {
	drivertest.RunConformanceTests(t, maker(tableBackend, drivertest.SinglePartition), tableCodecTester{}, []drivertest.AsTest{asTable})
}

func TestConformanceBlob(t *testing.T) {
	drivertest.RunConformanceTests(t, maker(blobBackend, drivertest.NoSupport), jsonCodecTester{}, []drivertest.AsTest{asBlob})
}

// tableCodecTester's native codec is tablestore's EntityCodec, what a
// tablestore.Store[T] of the same struct writes and reads.
type tableCodecTester struct{}

func (tableCodecTester) UnsupportedTypes() []drivertest.UnsupportedType {
	return []drivertest.UnsupportedType{drivertest.NanosecondTimes} // Edm.DateTime: 100 ns
}

func (tableCodecTester) NativeEncode(x any) (any, error) { return tablestore.EntityCodec{}.Marshal(x) }

func (tableCodecTester) NativeDecode(v, dest any) error {
	return tablestore.EntityCodec{}.Unmarshal(v.([]byte), dest)
}

func (tableCodecTester) DocstoreEncode(x any) (any, error) { return docstoreEncode(tableFormat{}, x) }

func (tableCodecTester) DocstoreDecode(v, dest any) error {
	return docstoreDecode(tableFormat{}, v, dest)
}

// jsonCodecTester's native codec is etagstore.JSON (encoding/json), what a
// blobstore.Store[T] (or a memstore one) of the same struct writes and
// reads.
type jsonCodecTester struct{}

func (jsonCodecTester) UnsupportedTypes() []drivertest.UnsupportedType { return nil }

func (jsonCodecTester) NativeEncode(x any) (any, error) { return etagstore.JSON.Marshal(x) }

func (jsonCodecTester) NativeDecode(v, dest any) error { return json.Unmarshal(v.([]byte), dest) }

func (jsonCodecTester) DocstoreEncode(x any) (any, error) { return docstoreEncode(jsonFormat{}, x) }

func (jsonCodecTester) DocstoreDecode(v, dest any) error {
	return docstoreDecode(jsonFormat{}, v, dest)
}

func docstoreEncode(f format, x any) (any, error) {
	doc, err := driver.NewDocument(x)
	if err != nil {
		return nil, err
	}
	m, err := encodeDoc(doc)
	if err != nil {
		return nil, err
	}
	return f.marshal(m)
}

func docstoreDecode(f format, v, dest any) error {
	doc, err := driver.NewDocument(dest)
	if err != nil {
		return err
	}
	m, err := f.unmarshal(v.([]byte))
	if err != nil {
		return err
	}
	return doc.Decode(decoder{m})
}

var _ = docstore.DefaultRevisionField
