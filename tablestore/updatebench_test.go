package tablestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// page is the document of BenchmarkTableUpdateVsRaw: a title, a body of
// some size and a counter each Update increments.
type page struct {
	Title      string
	Body       string
	B2, B3, B4 string `json:",omitempty"` // the rest of a body larger than one property
	N          int32  // Edm.Int32, as the raw loop's number
}

// pageOf is a page holding size bytes of body as UTF-16: in Body, and
// past the 64 KB one property holds, in B2, B3 and B4, 60 KB each.
func pageOf(size int) page {
	part := func(n int) string { return strings.Repeat("0123456789abcdef", max(n, 0)/2/16) }
	return page{Title: "bench", Body: part(min(size, 64<<10)), B2: part(min(size-64<<10, 60<<10)),
		B3: part(min(size-124<<10, 60<<10)), B4: part(min(size-184<<10, 60<<10))}
}

// properties is p's entity as the raw loop writes it.
func (p page) properties(pk, rk string) map[string]any {
	e := map[string]any{"PartitionKey": pk, "RowKey": rk, "Title": p.Title, "Body": p.Body, "N": p.N}
	for name, v := range map[string]string{"B2": p.B2, "B3": p.B3, "B4": p.B4} {
		if v != "" {
			e[name] = v
		}
	}
	return e
}

// BenchmarkTableUpdateVsRaw compares the client's cost of one uncontended
// read-modify-write of a document on Azurite whose body is 1 KB, 64 KB
// (the largest one property holds) or 240 KB as UTF-16, changing its
// one small field, done three ways:
//
//   - raw: hand-written with the raw SDK (GetEntity, json.Unmarshal into a
//     map, the counter incremented, json.Marshal, UpdateEntity with
//     IfMatch);
//   - lib: Store.Update with default options (the version cache on: one
//     request per op);
//   - nocache: Store.Update without the cache (a read and a write per op,
//     as raw: the codec's cost at equal requests).
//
// Each op runs the three back to back, in an order that rotates from op
// to op, each on its own entity, so that the machine's load (Azurite
// shares the two cores) falls on all alike. The metrics are, for each, the
// median wall time of one update (…-us), the process's CPU time per update
// (…-cpu-us, by getrusage: user plus system, garbage collection and the
// SDK included; Azurite runs in another process), HTTP requests per
// update (…-req), KiB of request bodies sent per update (…-sentKB) and
// KiB allocated per update (…-allocKB, SDK included);
// and lib's and nocache's ratios to raw (×…-wall: of the
// medians, ×…-cpu: of the CPU times). Run it with
//
//	scripts/with-azurite go test -run '^$' -bench TableUpdateVsRaw -count 5 ./tablestore/
func BenchmarkTableUpdateVsRaw(b *testing.B) {
	client, requests := countedTable(b)
	for _, size := range []int{1 << 10, 64 << 10, 240 << 10} {
		body := pageOf(size)
		b.Run(fmt.Sprintf("size=%dKB", size>>10), func(b *testing.B) {
			run := fmt.Sprint(size, b.N) // fresh entities for every run
			compareUpdates(b, requests, []updater{
				rawUpdater(b, client, "raw"+run, body),
				libraryUpdater(b, client, "lib", "lib"+run, body, nil),
				libraryUpdater(b, client, "nocache", "nocache"+run, body, &etagstore.Options{CacheSize: -1}),
			})
		})
	}
}

// updater is one way to do the benchmark's read-modify-write.
type updater struct {
	name   string
	update func(ctx context.Context) error
}

// compareUpdates runs each of us (raw first) once per op, in an order that
// rotates from op to op, and reports their figures (see
// BenchmarkTableUpdateVsRaw).
func compareUpdates(b *testing.B, requests *atomic.Int64, us []updater) {
	walls := make([][]time.Duration, len(us))
	cpu := make([]time.Duration, len(us))
	reqs := make([]int64, len(us))
	allocs := make([]uint64, len(us))
	bodies := make([]int64, len(us))
	ops := 0
	for b.Loop() {
		for j := range us {
			i := (ops + j) % len(us)
			sent, out, c, a, start := requests.Load(), sentBytes.Load(), processCPU(), allocated(), time.Now()
			err := us[i].update(b.Context())
			walls[i] = append(walls[i], time.Since(start))
			cpu[i] += processCPU() - c
			allocs[i] += allocated() - a
			reqs[i] += requests.Load() - sent
			bodies[i] += sentBytes.Load() - out
			if err != nil {
				b.Fatalf("%s: %v", us[i].name, err)
			}
		}
		ops++
	}
	medians := make([]float64, len(us))
	for i, u := range us {
		slices.Sort(walls[i])
		medians[i] = float64(walls[i][len(walls[i])/2].Microseconds())
		b.ReportMetric(medians[i], u.name+"-us")
		b.ReportMetric(float64(cpu[i].Microseconds())/float64(ops), u.name+"-cpu-us")
		b.ReportMetric(float64(reqs[i])/float64(ops), u.name+"-req")
		b.ReportMetric(float64(allocs[i])/1024/float64(ops), u.name+"-allocKB")
		b.ReportMetric(float64(bodies[i])/1024/float64(ops), u.name+"-sentKB")
		if i > 0 {
			b.ReportMetric(medians[i]/medians[0], "×"+u.name+"-wall")
			b.ReportMetric(float64(cpu[i])/float64(cpu[0]), "×"+u.name+"-cpu")
		}
	}
}

// countedTable creates a fresh table and returns a client for it that
// counts the HTTP requests it sends.
func countedTable(b testing.TB) (*aztables.Client, *atomic.Int64) {
	svc, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(b), &aztables.ClientOptions{ClientOptions: azuritetest.Options})
	if err != nil {
		b.Fatal(err)
	}
	name := azuritetest.Name("bench")
	if _, err := svc.CreateTable(b.Context(), name, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if _, err := svc.DeleteTable(context.Background(), name, nil); err != nil {
			b.Errorf("delete table %s: %v", name, err)
		}
	})
	requests := new(atomic.Int64)
	opts := azuritetest.Options
	opts.PerRetryPolicies = []policy.Policy{counter{requests}}
	counted, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(b), &aztables.ClientOptions{ClientOptions: opts})
	if err != nil {
		b.Fatal(err)
	}
	return counted.NewClient(name), requests
}

// counter is a pipeline policy counting the requests sent.
type counter struct{ n *atomic.Int64 }

func (c counter) Do(req *policy.Request) (*http.Response, error) {
	c.n.Add(1)
	sentBytes.Add(max(req.Raw().ContentLength, 0))
	return req.Next()
}

// sentBytes counts the bytes of the request bodies counted tables send.
var sentBytes atomic.Int64

// libraryUpdater increments the counter of a fresh document in partition
// pk through Store.Update with storeOpts.
func libraryUpdater(b *testing.B, client *aztables.Client, name, pk string, body page, storeOpts *etagstore.Options) updater {
	s := tablestore.NewStore[page](client, &tablestore.Options{Partition: pk}, storeOpts)
	if _, err := s.Upsert(b.Context(), "k", body); err != nil {
		b.Fatal(err)
	}
	inc := func(p *page) error { p.N++; return nil }
	return updater{name, func(ctx context.Context) error {
		_, err := s.Update(ctx, "k", inc)
		return err
	}}
}

// rawUpdater increments the counter of a fresh entity in partition pk the
// way a user of the raw SDK would.
func rawUpdater(b *testing.B, client *aztables.Client, pk string, body page) updater {
	first, _ := json.Marshal(body.properties(pk, "k"))
	if _, err := client.UpsertEntity(b.Context(), first, nil); err != nil {
		b.Fatal(err)
	}
	return rawUpdate(client, pk, "k")
}

// rawUpdate increments the counter N of entity pk/rk with the raw SDK.
func rawUpdate(client *aztables.Client, pk, rk string) updater {
	return updater{"raw", func(ctx context.Context) error {
		resp, err := client.GetEntity(ctx, pk, rk, nil)
		if err != nil {
			return err
		}
		var e map[string]any
		if err := json.Unmarshal(resp.Value, &e); err != nil {
			return err
		}
		e["N"] = e["N"].(float64) + 1
		update, err := json.Marshal(e)
		if err != nil {
			return err
		}
		etag := resp.ETag
		_, err = client.UpdateEntity(ctx, update, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		return err
	}}
}

// allocated is how many bytes the process has allocated on the heap so
// far (runtime/metrics, read without stopping the world).
func allocated() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
