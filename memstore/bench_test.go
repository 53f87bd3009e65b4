package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// benchDoc is a small document, as in the root package's benchmarks.
type benchDoc struct {
	Title string
	Body  string
	N     int64
}

var benchSeed = benchDoc{Title: "bench", Body: "some text of a realistic length for a small document"}

// rawMap is the baseline a user would write by hand: a map of encoded
// documents with a version each, a mutex, and encoding/json. Its update is
// the optimistic read-modify-write loop: read under the lock, decode,
// mutate, encode, and store under the lock if the version is unchanged.
type rawMap struct {
	mu   sync.Mutex
	docs map[string]rawDoc
}

type rawDoc struct {
	data    []byte
	version uint64
}

var errRawNotFound = errors.New("not found")

func (r *rawMap) update(key string, mutate func(*benchDoc) error) (benchDoc, uint64, error) {
	for {
		r.mu.Lock()
		cur, ok := r.docs[key]
		r.mu.Unlock()
		if !ok {
			return benchDoc{}, 0, errRawNotFound
		}
		var v benchDoc
		if err := json.Unmarshal(cur.data, &v); err != nil {
			return benchDoc{}, 0, err
		}
		if err := mutate(&v); err != nil {
			return benchDoc{}, 0, err
		}
		data, err := json.Marshal(v)
		if err != nil {
			return benchDoc{}, 0, err
		}
		r.mu.Lock()
		if r.docs[key].version == cur.version {
			r.docs[key] = rawDoc{data: data, version: cur.version + 1}
			r.mu.Unlock()
			return v, cur.version + 1, nil
		}
		r.mu.Unlock()
	}
}

// BenchmarkMemUpdate: one uncontended Update of a small document through a
// default Store on memstore (impl=store), beside the hand-written map,
// mutex and encoding/json loop (impl=raw), in the same run. The target is
// store within 1.25× raw's time and 2× its bytes per op.
func BenchmarkMemUpdate(b *testing.B) {
	inc := func(d *benchDoc) error { d.N++; return nil }
	b.Run("impl=store", func(b *testing.B) {
		ctx := context.Background()
		s := etagstore.New[benchDoc](memstore.New(nil), nil)
		if _, err := s.Create(ctx, "k", benchSeed); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			if _, err := s.Update(ctx, "k", inc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=raw", func(b *testing.B) {
		data, _ := json.Marshal(benchSeed)
		r := &rawMap{docs: map[string]rawDoc{"k": {data: data, version: 1}}}
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			if _, _, err := r.update("k", inc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// tagsDoc is benchDoc with a list: a T the Store cannot copy without
// sharing memory, so that every Update decodes what it starts from (see
// the root package's exact types).
type tagsDoc struct {
	Title string
	Body  string
	Tags  []string
	N     int64
}

// BenchmarkMemUpdateDecoding is BenchmarkMemUpdate for tagsDoc: the Store
// decodes the version it starts from, as the raw loop does.
func BenchmarkMemUpdateDecoding(b *testing.B) {
	inc := func(d *tagsDoc) error { d.N++; return nil }
	seed := tagsDoc{Title: benchSeed.Title, Body: benchSeed.Body, Tags: []string{"a", "b"}}
	b.Run("impl=store", func(b *testing.B) {
		ctx := context.Background()
		s := etagstore.New[tagsDoc](memstore.New(nil), nil)
		if _, err := s.Create(ctx, "k", seed); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			if _, err := s.Update(ctx, "k", inc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=raw", func(b *testing.B) {
		var mu sync.Mutex
		data, _ := json.Marshal(seed)
		docs := map[string]rawDoc{"k": {data: data, version: 1}}
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			mu.Lock()
			cur := docs["k"]
			mu.Unlock()
			var v tagsDoc
			if err := json.Unmarshal(cur.data, &v); err != nil {
				b.Fatal(err)
			}
			_ = inc(&v)
			data, err := json.Marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			mu.Lock()
			if docs["k"].version == cur.version {
				docs["k"] = rawDoc{data: data, version: cur.version + 1}
			}
			mu.Unlock()
		}
	})
}

// reportCPU reports the CPU time per op since start (cpu-ns/op), beside
// the wall time the benchmark reports: the machine the figures come from
// may be shared.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

var benchMillion = flag.Bool("memstore.million", false, "also run BenchmarkMemPage at 10⁶ documents (slow to build)")

// filled returns a memstore holding n small documents, keys "doc/%07d",
// written straight to the backend.
func filled(b *testing.B, n int) *memstore.Backend {
	b.Helper()
	ctx := context.Background()
	mem := memstore.New(nil)
	data := []byte(`{"Title":"t"}`)
	for i := range n {
		if _, err := mem.Write(ctx, fmt.Sprintf("doc/%07d", i), driver.Write{Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	return mem
}

// BenchmarkMemPage: one page of 50 at 10⁴, 10⁵ and (with
// -memstore.million) 10⁶ documents: Store.Page from the start (at=start),
// and the backend's ListPage from the middle of the keys (at=middle).
func BenchmarkMemPage(b *testing.B) {
	sizes := []int{1e4, 1e5}
	if *benchMillion {
		sizes = append(sizes, 1e6)
	}
	for _, n := range sizes {
		mem := filled(b, n)
		s := etagstore.New[benchDoc](mem, nil)
		b.Run("docs="+strconv.Itoa(n)+"/at=start", func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				p, err := s.Page(ctx, "", 50, "")
				if err != nil || len(p.Docs) != 50 {
					b.Fatalf("Page = %d docs, %v", len(p.Docs), err)
				}
			}
		})
		b.Run("docs="+strconv.Itoa(n)+"/at=middle", func(b *testing.B) {
			ctx := context.Background()
			after := fmt.Sprintf("doc/%07d", n/2)
			b.ReportAllocs()
			for b.Loop() {
				items, more, err := mem.ListPage(ctx, "doc/", after, 50)
				if err != nil || len(items) != 50 || !more {
					b.Fatalf("ListPage = %d items, %v, %v", len(items), more, err)
				}
			}
		})
	}
}
