package etagstore_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

type benchDoc struct {
	Title string
	Body  string
	N     int64
}

// BenchmarkUpdate: one uncontended read-modify-write on memstore.
func BenchmarkUpdate(b *testing.B) {
	ctx := context.Background()
	s := etagstore.New[benchDoc](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", benchDoc{Title: "bench", Body: "some text of a realistic length for a small document"}); err != nil {
		b.Fatal(err)
	}
	inc := func(d *benchDoc) error { d.N++; return nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Update(ctx, "k", inc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateParallel: GOMAXPROCS writers on one hot key.
func BenchmarkUpdateParallel(b *testing.B) {
	ctx := context.Background()
	s := etagstore.New[benchDoc](memstore.New(nil), &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1 << 20, MaxElapsedTime: -1}})
	if _, err := s.Create(ctx, "k", benchDoc{Title: "bench"}); err != nil {
		b.Fatal(err)
	}
	inc := func(d *benchDoc) error { d.N++; return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Update(ctx, "k", inc); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	s := etagstore.New[benchDoc](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "k", benchDoc{Title: "bench"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONCodec: the default codec on a small document.
func BenchmarkJSONCodec(b *testing.B) {
	v := benchDoc{Title: "bench", Body: "some text of a realistic length for a small document", N: 7}
	data, _ := etagstore.JSON.Marshal(v)
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := etagstore.JSON.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var d benchDoc
			if err := etagstore.JSON.Unmarshal(data, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkUpdateInstrumented: BenchmarkUpdate with an OpenTelemetry SDK
// installed (spans to a discarding exporter, metrics to a manual reader),
// beside BenchmarkUpdate, where no SDK is installed and instrumentation is a
// no-op.
func BenchmarkUpdateInstrumented(b *testing.B) {
	ctx := context.Background()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	s := etagstore.New[benchDoc](memstore.New(nil), &etagstore.Options{TracerProvider: tp, MeterProvider: mp})
	if _, err := s.Create(ctx, "k", benchDoc{Title: "bench", Body: "some text of a realistic length for a small document"}); err != nil {
		b.Fatal(err)
	}
	inc := func(d *benchDoc) error { d.N++; return nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Update(ctx, "k", inc); err != nil {
			b.Fatal(err)
		}
	}
}
