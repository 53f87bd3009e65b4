package tablestore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// page is the document of BenchmarkTableUpdateVsRaw: a title, a body of
// some size and a counter each Update increments.
type page struct {
	Title string
	Body  string
	N     int32 // Edm.Int32, as the raw loop's number
}

// BenchmarkTableUpdateVsRaw compares the client's cost of one uncontended
// read-modify-write of a document on Azurite whose body is 1 KB, 16 KB or
// 64 KB as UTF-16 (the largest one property holds): through Store.Update
// with default options (impl=library), and hand-written with the raw SDK
// (impl=raw: GetEntity, json.Unmarshal into a map, the counter
// incremented, json.Marshal, UpdateEntity with IfMatch). Beside the wall
// time (ns/op) it reports the process's CPU time per op (cpu-ns/op, by
// getrusage: user plus system, garbage collection and the SDK included;
// Azurite runs in another process). Raw and library alternate, twice each,
// so that neither gains from running while Azurite is warmer. Run it with
//
//	scripts/with-azurite go test -run '^$' -bench TableUpdateVsRaw -count 5 ./tablestore/
func BenchmarkTableUpdateVsRaw(b *testing.B) {
	client := azuritetest.NewTable(b)
	for _, size := range []int{1 << 10, 16 << 10, 64 << 10} {
		body := strings.Repeat("0123456789abcdef", size/2/16) // size bytes as UTF-16
		for round := range 2 {
			b.Run(fmt.Sprintf("size=%dKB/impl=raw", size>>10), func(b *testing.B) {
				rawUpdates(b, client, fmt.Sprintf("raw%d", round), body)
			})
			b.Run(fmt.Sprintf("size=%dKB/impl=library", size>>10), func(b *testing.B) {
				libraryUpdates(b, client, fmt.Sprintf("lib%d", round), body)
			})
		}
	}
}

func libraryUpdates(b *testing.B, client *aztables.Client, pk, body string) {
	s := tablestore.NewStore[page](client, &tablestore.Options{Partition: pk}, nil)
	if _, err := s.Upsert(b.Context(), "k", page{Title: "bench", Body: body}); err != nil {
		b.Fatal(err)
	}
	inc := func(p *page) error { p.N++; return nil }
	cpu := startCPU()
	for b.Loop() {
		if _, err := s.Update(b.Context(), "k", inc); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

func rawUpdates(b *testing.B, client *aztables.Client, pk, body string) {
	ctx := b.Context()
	first, _ := json.Marshal(map[string]any{"PartitionKey": pk, "RowKey": "k", "Title": "bench", "Body": body, "N": 0})
	if _, err := client.UpsertEntity(ctx, first, nil); err != nil {
		b.Fatal(err)
	}
	cpu := startCPU()
	for b.Loop() {
		resp, err := client.GetEntity(ctx, pk, "k", nil)
		if err != nil {
			b.Fatal(err)
		}
		var e map[string]any
		if err := json.Unmarshal(resp.Value, &e); err != nil {
			b.Fatal(err)
		}
		e["N"] = e["N"].(float64) + 1
		update, _ := json.Marshal(e)
		etag := resp.ETag
		if _, err := client.UpdateEntity(ctx, update, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace}); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// cpuClock measures the process's CPU time (user and system) from its
// start.
type cpuClock time.Duration

func startCPU() cpuClock { return cpuClock(processCPU()) }

// report adds the CPU time per iteration since c started as cpu-ns/op.
func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-time.Duration(c))/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
