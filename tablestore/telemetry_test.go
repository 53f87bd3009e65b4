package tablestore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// spanTelemetry is an OpenTelemetry SDK in memory for one test: spans and
// metrics.
type spanTelemetry struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newSpanTelemetry(t *testing.T) *spanTelemetry {
	tel := &spanTelemetry{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tel.spans))
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() { _ = tel.tp.Shutdown(context.Background()); _ = tel.mp.Shutdown(context.Background()) })
	return tel
}

// recorded is one span as the tests compare it: name, kind, attributes
// and status.
type recorded struct {
	Name   string
	Kind   string
	Attrs  map[string]string
	Status string // "" unless Error: then the description
}

func (tel *spanTelemetry) recorded() []recorded {
	var out []recorded
	for _, sp := range tel.spans.GetSpans() {
		r := recorded{Name: sp.Name, Kind: sp.SpanKind.String(), Attrs: map[string]string{}}
		for _, kv := range sp.Attributes {
			r.Attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if sp.Status.Code == codes.Error {
			r.Status = "Error: " + sp.Status.Description
		}
		out = append(out, r)
	}
	return out
}

// durations counts etagstore.operation.duration by operation and outcome.
func (tel *spanTelemetry) durations(t *testing.T) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "etagstore.operation.duration" {
				for _, p := range h.DataPoints {
					op, _ := p.Attributes.Value("etagstore.operation")
					oc, _ := p.Attributes.Value("etagstore.outcome")
					be, _ := p.Attributes.Value("etagstore.backend")
					out[be.AsString()+" "+op.AsString()+" "+oc.AsString()] += p.Count
				}
			}
		}
	}
	return out
}

// Query and QueryPage are spans of the Store they are given, with its
// tracer and meter: exact names and attributes, the filter (which names
// keys and values) only with RecordKeys, as etagstore.filter.
func TestQuerySpans(t *testing.T) {
	const partition = "alice@example.com"
	filter := tablestore.Eq("PartitionKey", partition)
	bad := tablestore.Eq("Owner", tablestore.GUID(partition)) // not a GUID: its error quotes the value
	for _, recordKeys := range []bool{false, true} {
		t.Run(fmt.Sprintf("RecordKeys=%v", recordKeys), func(t *testing.T) {
			tel := newSpanTelemetry(t)
			b := tablestore.New(azuritetest.NewTable(t), nil)
			plain := etagstore.New[Task](b, nil) // not traced: its writes record nothing here
			for _, k := range []string{"1", "2", "3"} {
				if _, err := plain.Create(t.Context(), partition+"/"+k, Task{Title: k}); err != nil {
					t.Fatal(err)
				}
			}
			s := etagstore.New[Task](b, &etagstore.Options{TracerProvider: tel.tp, MeterProvider: tel.mp, RecordKeys: recordKeys})
			runQueries(t, s, filter, bad)

			got := tel.recorded()
			if diff := cmp.Diff(wantQuerySpans(filter, bad, recordKeys), got); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
			for _, r := range got {
				if !recordKeys && strings.Contains(fmt.Sprint(r), partition) {
					t.Errorf("without RecordKeys, span %s names the partition: %+v", r.Name, r)
				}
			}
			wantDurations := map[string]uint64{
				"tablestore Query ok": 2, "tablestore Query invalid": 1,
				"tablestore QueryPage ok": 2, "tablestore QueryPage invalid": 1,
			}
			if diff := cmp.Diff(wantDurations, tel.durations(t)); diff != "" {
				t.Errorf("etagstore.operation.duration (-want +got):\n%s", diff)
			}
		})
	}
}

// runQueries queries s, whose table holds three entities matching filter:
// Query to the end, Query stopped early, Query with bad (a filter that
// cannot be expressed), then QueryPage over two pages and with bad.
func runQueries(t *testing.T, s *etagstore.Store[Task], filter, bad tablestore.Filter) {
	t.Helper()
	ctx := t.Context()
	n := 0
	for _, err := range tablestore.Query(ctx, s, filter) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("Query yielded %d documents, want 3", n)
	}
	for range tablestore.Query(ctx, s, filter) {
		break // stopped early: still ok
	}
	for _, err := range tablestore.Query(ctx, s, bad) {
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Fatalf("Query(bad filter) = %v", err)
		}
	}
	p, err := tablestore.QueryPage(ctx, s, filter, 2, "")
	if err != nil || len(p.Docs) != 2 || p.Next == "" {
		t.Fatalf("first page %+v, %v", p, err)
	}
	if p, err = tablestore.QueryPage(ctx, s, filter, 2, p.Next); err != nil || len(p.Docs) != 1 {
		t.Fatalf("second page %+v, %v", p, err)
	}
	if _, err := tablestore.QueryPage(ctx, s, bad, 2, ""); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("QueryPage(bad filter) = %v", err)
	}
}

// wantQuerySpans are the spans runQueries makes.
func wantQuerySpans(filter, bad tablestore.Filter, recordKeys bool) []recorded {
	span := func(op, outcome string, f tablestore.Filter, err error) recorded {
		r := recorded{Name: "etagstore." + op, Kind: "client", Attrs: map[string]string{
			"etagstore.backend": "tablestore", "etagstore.operation": op, "etagstore.outcome": outcome}}
		if recordKeys {
			r.Attrs["etagstore.filter"] = f.String()
		}
		switch {
		case err == nil:
		case recordKeys:
			r.Status = "Error: " + err.Error()
		default:
			r.Status = "Error: " + outcome
		}
		return r
	}
	badErr := fmt.Errorf("%w: %w", etagstore.ErrInvalidInput, bad.Err())
	return []recorded{
		span("Query", "ok", filter, nil),
		span("Query", "ok", filter, nil),
		span("Query", "invalid", bad, badErr),
		span("QueryPage", "ok", filter, nil),
		span("QueryPage", "ok", filter, nil),
		span("QueryPage", "invalid", bad, badErr),
	}
}
