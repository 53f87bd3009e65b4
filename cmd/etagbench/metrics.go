package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// printMetrics (-metrics) prints the library's own metrics of each
// one-process library cell, read through the OpenTelemetry SDK.
var printMetrics bool

// cellMetrics is the meter of the cell being measured, nil when off.
var cellMetrics *metricsCell

type metricsCell struct {
	provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

func newMetricsCell() *metricsCell {
	r := sdkmetric.NewManualReader()
	return &metricsCell{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), reader: r}
}

// summary renders the cell's metrics on one line: histogram means and
// counts, counters by attribute.
func (c *metricsCell) summary() string {
	var rm metricdata.ResourceMetrics
	if err := c.reader.Collect(context.Background(), &rm); err != nil {
		return err.Error()
	}
	_ = c.provider.Shutdown(context.Background())
	var parts []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			name := strings.TrimPrefix(m.Name, "etagstore.")
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				var n uint64
				var sum int64
				for _, p := range d.DataPoints {
					n, sum = n+p.Count, sum+p.Sum
				}
				if n > 0 {
					parts = append(parts, fmt.Sprintf("%s mean %.2f (n=%d)", name, float64(sum)/float64(n), n))
				}
			case metricdata.Sum[int64]:
				var by []string
				for _, p := range d.DataPoints {
					by = append(by, fmt.Sprintf("%s=%d", attrs(p.Attributes), p.Value))
				}
				sort.Strings(by)
				parts = append(parts, fmt.Sprintf("%s {%s}", name, strings.Join(by, ", ")))
			}
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// attrs renders the attributes other than the backend.
func attrs(set attribute.Set) string {
	var kv []string
	for _, a := range set.ToSlice() {
		if a.Key != "etagstore.backend" {
			kv = append(kv, a.Value.Emit())
		}
	}
	return strings.Join(kv, ",")
}
