package tablestore_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// A write whose answer the fault proxy drops after Azurite committed it,
// in the Store's metrics: one lost response, resolved as committed, and the
// Update a success applied once.
func TestLostResponseInMetrics(t *testing.T) {
	ctx := t.Context()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), storetest.Faults{Seed: 1, DropAfterCommit: 1})
	b := tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "p"})
	plain := etagstore.New[Task](b, nil) // not metered: its own lost answers do not count
	if _, err := plain.Create(ctx, "k", Task{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[Task](b, &etagstore.Options{MeterProvider: mp})
	d, err := s.Update(ctx, "k", func(v *Task) error { v.N++; return nil })
	if err != nil || d.Value.N != 1 {
		t.Fatalf("Update through a dropped answer = %+v, %v", d, err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "etagstore.lost_responses" {
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := p.Attributes.Value("etagstore.verdict")
					got[v.AsString()] += p.Value
				}
			}
		}
	}
	if len(got) != 1 || got["committed"] != 1 {
		t.Errorf("lost responses %v, want committed: 1", got)
	}
	cur, err := plain.Get(ctx, "k")
	if err != nil || cur.Value.N != 1 {
		t.Fatalf("stored %+v, %v; want N 1", cur, err)
	}
}
