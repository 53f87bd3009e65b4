package tablestore_test

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	})
}

// Index entries without Options.Partition: a scope per partition, "pk/",
// and entries of one name in two partitions are distinct (Run runs the
// same cases with a Partition: one scope, "").
func TestEntriesByPartition(t *testing.T) {
	storetest.RunEntries(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), nil)
	})
}

// A Store of an older type keeps the properties a newer type wrote, each
// with its type.
func TestExtraMembersKept(t *testing.T) {
	storetest.RunExtra(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	})
}

func TestExactlyOnceUnderFaults(t *testing.T) {
	storetest.RunFaults(t, func(t *testing.T, f storetest.Faults) (driver.Backend, func() map[string]int) {
		proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), f)
		return tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "docs"}), proxy.Counts
	})
}

func TestMissingTable(t *testing.T) {
	storetest.RunMissingResource(t, func(t *testing.T) driver.Backend {
		return tablestore.New(azuritetest.MissingTable(t), &tablestore.Options{Partition: "docs"})
	}, "table")
	// The backend's own operations: merges, batches, queries.
	s := etagstore.New[Task](tablestore.New(azuritetest.MissingTable(t), &tablestore.Options{Partition: "docs"}), nil)
	ctx := t.Context()
	errs := map[string]error{}
	_, errs["Merge"] = tablestore.Merge(ctx, s, etagstore.Doc[Task]{Key: "k", ETag: etagstore.ETagAny, Value: Task{N: 1}}, "N")
	_, errs["UpsertMerge"] = tablestore.UpsertMerge(ctx, s, "k", Task{N: 1}, "N")
	_, errs["Batch"] = tablestore.NewBatch(s).Create("a", Task{}).Create("b", Task{}).Submit(ctx)
	_, errs["QueryPage"] = tablestore.QueryPage(ctx, s, tablestore.Eq("Done", true), 10, "")
	for _, err := range tablestore.Query(ctx, s, tablestore.Eq("Done", true)) {
		errs["Query"] = err
	}
	for op, err := range errs {
		if !errors.Is(err, etagstore.ErrStorageNotFound) || errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("%s on a missing table = %v, want ErrStorageNotFound (and not ErrNotFound)", op, err)
		}
	}
}

// A 400 with no error code (Azurite's answer to a table name that is too
// short) is a definite refusal, ErrInvalidInput — never an unknown outcome.
func TestBadRequestIsDefinite(t *testing.T) {
	svc, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[struct{ N int }](tablestore.New(svc.NewClient("ab"), &tablestore.Options{Partition: "p"}), nil)
	_, err = s.Upsert(t.Context(), "k", struct{ N int }{1})
	if !errors.Is(err, etagstore.ErrInvalidInput) || errors.Is(err, etagstore.ErrOutcomeUnknown) {
		t.Errorf("Upsert to table %q = %v, want ErrInvalidInput, definite", "ab", err)
	}
}
