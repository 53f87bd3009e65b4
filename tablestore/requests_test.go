package tablestore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// etagstore.requests counts every request a Store sends, by operation and
// outcome: over a workload of every kind of operation (contended Updates
// with group commit, lists in pages, a transaction, a batch, a merge, a
// query, refusals) with a tenth of the writes' answers dropped after they
// committed, its sum equals what the transport under the SDK saw. The
// SDK's own retries are off: a request it retried would count once here
// and twice in the transport (docs/observability.md says so).
func TestRequestsMatchTheTransport(t *testing.T) {
	ctx := t.Context()
	tel := newSpanTelemetry(t)
	sent := &countingTransport{}
	opts := azuritetest.FastRetries
	opts.Retry.MaxRetries = -1
	opts.Transport = sent
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), storetest.Faults{Seed: 7, DropAfterCommit: 0.1})
	client := azuritetest.NewTableWith(t, proxy.URL(), opts)
	b := tablestore.New(client, &tablestore.Options{Partition: "p", PageSize: 4})
	s := etagstore.New[Task](b, &etagstore.Options{MeterProvider: tel.mp})

	for i := range 10 {
		if _, err := s.Create(ctx, fmt.Sprintf("k%02d", i), Task{Title: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 10 {
				if _, err := s.Update(ctx, fmt.Sprintf("k%02d", g%2), func(v *Task) error { v.N++; return nil }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get of a missing key = %v", err)
	}
	// Its refusal's answer may be dropped too (a tenth are): read after,
	// k02 holds another write, which this create may have preceded, so the
	// outcome is unknown; either way the requests are counted. It is sent
	// again until a refusal arrives, so that Create/exists is counted.
	for try := 1; ; try++ {
		_, err := s.Create(ctx, "k02", Task{})
		if errors.Is(err, etagstore.ErrExists) {
			break
		}
		if !errors.Is(err, etagstore.ErrOutcomeUnknown) || try == 20 {
			t.Fatalf("Create of an existing key, try %d = %v; want ErrExists (or ErrOutcomeUnknown, its answer dropped)", try, err)
		}
	}
	n := 0
	for _, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 10 {
		t.Fatalf("listed %d, want 10", n)
	}
	if _, err := s.Page(ctx, "", 5, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
		a, err := tx.Get("k03")
		if err != nil {
			return err
		}
		a.N--
		if err := tx.Put("k03", a); err != nil {
			return err
		}
		return tx.Delete("k04")
	}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, "k05")
	if err != nil {
		t.Fatal(err)
	}
	d.Value.Owner = "o"
	if _, err := tablestore.Merge(ctx, s, d, "Owner"); err != nil {
		t.Fatal(err)
	}
	if _, err := tablestore.NewBatch(s).Create("b1", Task{}).Upsert("b2", Task{}).Submit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, err := range tablestore.Query(ctx, s, tablestore.Eq("Owner", "o")) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "k06", etagstore.ETag(`W/"datetime'2020-01-01T00%3A00%3A00Z'"`)); !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("Delete with a stale ETag = %v", err)
	}

	counted, byOp := requests(t, tel)
	if counted != sent.n.Load() {
		t.Errorf("etagstore.requests counted %d requests, the transport saw %d; by operation and outcome: %v", counted, sent.n.Load(), byOp)
	}
	for _, want := range []string{"Create/ok", "Create/exists", "Update/ok", "Get/not_found", "List/ok", "Page/ok",
		"Transact/ok", "Merge/ok", "Batch/ok", "Query/ok", "Delete/conflict"} {
		if byOp[want] == 0 {
			t.Errorf("no request counted as %s: %v", want, byOp)
		}
	}
	if byOp["List/ok"] < 3 {
		t.Errorf("a listing of 10 in pages of 4 counted %d requests, want 3 or more", byOp["List/ok"])
	}
	t.Logf("%d requests: %v", counted, byOp)
}

// requests sums etagstore.requests, in all and by "operation/outcome".
func requests(t *testing.T, tel *spanTelemetry) (int64, map[string]int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var sum int64
	by := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "etagstore.requests" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				op, _ := p.Attributes.Value("etagstore.operation")
				oc, _ := p.Attributes.Value("etagstore.outcome")
				by[op.AsString()+"/"+oc.AsString()] += p.Value
				sum += p.Value
			}
		}
	}
	return sum, by
}
