package blobstore_test

import (
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// BenchmarkHotKey16 has 16 goroutines increment one blob document, through
// optimistic Update and through the lease Lock (lock, read, replace,
// unlock), in the same run on Azurite. Run it with
//
//	scripts/with-azurite go test -run '^$' -bench HotKey16 -benchtime 200x ./blobstore/
func BenchmarkHotKey16(b *testing.B) {
	c := azuritetest.NewContainer(b)
	docs := blobstore.New(c, &blobstore.Options{Prefix: "docs/"})
	s := etagstore.New[Note](docs, &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxAttempts: 1 << 20, MaxElapsedTime: -1}})
	locker, err := blobstore.NewLocker(c, &blobstore.LockOptions{PollInitial: 5 * time.Millisecond, PollMax: 200 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	inc := func(n *Note) error { n.N++; return nil }
	run := func(b *testing.B, key string, op func() error) {
		if _, err := s.Upsert(b.Context(), key, Note{}); err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 goroutines
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		d, err := s.Get(b.Context(), key)
		if err != nil || d.Value.N != b.N {
			b.Fatalf("counter = %d, %v; want %d", d.Value.N, err, b.N)
		}
	}
	b.Run("update", func(b *testing.B) {
		run(b, "update", func() error {
			_, err := s.Update(b.Context(), "update", inc)
			return err
		})
	})
	b.Run("lock", func(b *testing.B) {
		run(b, "lock", func() error {
			lk, err := locker.Lock(b.Context(), "lock")
			if err != nil {
				return err
			}
			d, err := s.Get(lk.Context(), "lock")
			if err == nil {
				d.Value.N++
				_, err = s.Replace(lk.Context(), d)
			}
			if uerr := lk.Unlock(b.Context()); err == nil {
				err = uerr
			}
			return err
		})
	})
}
