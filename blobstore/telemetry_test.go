package blobstore_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// A broken lock, in the Locker's metrics: it was acquired, its renewal
// found the lease broken (lost, no renewal before), and the lock taken
// after it was acquired and released.
func TestLockEventsOfABrokenLock(t *testing.T) {
	ctx := t.Context()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c := azuritetest.NewContainer(t)
	l, err := blobstore.NewLocker(c, &blobstore.LockOptions{RenewInterval: 500 * time.Millisecond, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	breaker, err := blobstore.New(c, &blobstore.Options{Prefix: "locks/"}).BlobLease("k", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := breaker.Break(ctx, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lock did not notice its lease was broken")
	}
	_ = lk.Unlock(ctx) // reports the loss; nothing is released
	again, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "etagstore.lock.events" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := p.Attributes.Value("etagstore.event")
				got[v.AsString()] += p.Value
			}
		}
	}
	want := map[string]int64{"acquired": 2, "lost": 1, "released": 1}
	if len(got) != len(want) || got["acquired"] != 2 || got["lost"] != 1 || got["released"] != 1 {
		t.Errorf("lock events %v, want %v", got, want)
	}
}
