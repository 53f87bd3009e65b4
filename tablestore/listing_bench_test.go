package tablestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Listing a table across many partitions (issue #25, part 5): 4,000
// documents in 2,000 partitions of two rows, listed whole through
// Store.List and through Store.Page 50 at a time, each beside the raw SDK
// loop a user would write for it: for List a ListEntities pager of the
// service's largest pages (1,000 entities); for Page one of 50 entities a
// page that follows the service's continuation (rawPager), and one that
// resumes after the last key with Page's filter (rawAfter, the loop
// behind a stateless "next" link; on Azurite, which evaluates a filter on
// every entity of the table for each request, it shows what the filter
// costs). Every listing reads all 4,000 documents and decodes them into
// Task. Each op runs the raw loops and the library's back to back, in
// alternating order, so that the machine's load falls on both alike. The
// metrics (see compare) are each one's median and minimum milliseconds
// per listing, its CPU milliseconds in this process and in Azurite, and
// HTTP requests per listing; and the library's ratio to each raw loop:
// the median of the ops' ratios (×rawPager), the ratio of the minimums
// (×rawPager-min) and the median ratio of CPU time, client and Azurite
// together (cpu×rawPager), which the load of a shared machine disturbs
// least. It runs at loopback and with 10 ms added before every request (a
// delaying transport, as etagbench -rtt does with a proxy).
//
// Where Page's cost beyond the raw pager goes (this benchmark's CPU
// columns and pprof, 2026-11): each page is a new query whose filter
// resumes after the last key, and Azurite, which scans every entity of
// the table for each request, evaluates that filter on each of them,
// where a continuation costs it one comparison: about 0.3 ms a request at
// 4,000 entities, 10 to 20% more of its CPU than the raw pager's
// continuations. The service's continuation cannot stand in for the
// filter: a page must also show documents added since between its last
// key and the service's next one (storetest's PageConcurrentChanges adds
// them there). In the client, 80% of a page is the SDK's JSON (it decodes
// each entity into a map and encodes it again, for the raw loops alike);
// turning entities into documents is about 13%, the filter and token 1%;
// asking for one entity more than the page (to know whether another
// follows) adds one entity in 51. On a loaded machine give the
// benchmark ops enough for the medians to mean something:
//
//	scripts/with-azurite go test -run '^$' -bench ListAcrossPartitions -benchtime 10x -count 5 ./tablestore/
func BenchmarkListAcrossPartitions(b *testing.B) {
	const partitions, rows = 2000, 2
	svc := benchService(b, 0, nil)
	name := azuritetest.Name("list")
	if _, err := svc.CreateTable(b.Context(), name, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), name, nil) })
	fill(b, tablestore.NewStore[Task](svc.NewClient(name), nil, nil), partitions, rows)
	server := azuriteCPU(b)

	for _, rtt := range []time.Duration{0, 10 * time.Millisecond} {
		var requests atomic.Int64
		client := benchService(b, rtt, &requests).NewClient(name)
		s := tablestore.NewStore[Task](client, nil, nil)
		cell := func(name string, listings ...listing) {
			b.Run(fmt.Sprintf("rtt=%v/%s", rtt, name), func(b *testing.B) {
				compare(b, &requests, server, partitions*rows, listings)
			})
		}
		cell("List",
			listing{"List", func(ctx context.Context) (int, error) { return storeList(ctx, s) }},
			listing{"rawPager", func(ctx context.Context) (int, error) { return rawList(ctx, client, 1000) }})
		cell("Page50",
			listing{"Page", func(ctx context.Context) (int, error) { return storePages(ctx, s, 50) }},
			listing{"rawPager", func(ctx context.Context) (int, error) { return rawList(ctx, client, 50) }},
			listing{"rawAfter", func(ctx context.Context) (int, error) { return rawAfter(ctx, client, 50) }})
	}
}

// listing is one way to list the table whole; it returns how many
// documents it read.
type listing struct {
	name string
	list func(ctx context.Context) (int, error)
}

// cost is what one listing took: wall time, this process's CPU time (the
// client's), Azurite's CPU time (zero when it cannot be read) and HTTP
// requests.
type cost struct {
	wall, client, server time.Duration
	requests             int64
}

// compare runs each of listings (the library's first, then raw loops)
// once per op, in an order that rotates from op to op, and checks that
// each read want documents. It reports, for each listing, the median and
// minimum milliseconds per listing, the median client and Azurite CPU
// milliseconds and the requests per listing; and the library's ratio to
// each raw loop: the median over ops of the two wall times of one op
// (neighbours in time, so under the same load), the ratio of the two
// minimums, and the median ratio of CPU time (client and Azurite).
func compare(b *testing.B, requests *atomic.Int64, server func() time.Duration, want int, listings []listing) {
	costs := make([][]cost, len(listings))
	ops := 0
	for b.Loop() {
		for j := range listings {
			i := (ops + j) % len(listings)
			costs[i] = append(costs[i], measure(b, requests, server, want, listings[i]))
		}
		ops++
	}
	for i, l := range listings {
		c := costs[i]
		b.ReportMetric(ms(median(c, func(c cost) float64 { return float64(c.wall) })), l.name+"-ms")
		b.ReportMetric(ms(slices.Min(each(c, func(c cost) float64 { return float64(c.wall) }))), l.name+"-min-ms")
		b.ReportMetric(ms(median(c, func(c cost) float64 { return float64(c.client) })), l.name+"-cpu-ms")
		b.ReportMetric(ms(median(c, func(c cost) float64 { return float64(c.server) })), l.name+"-azurite-cpu-ms")
		b.ReportMetric(median(c, func(c cost) float64 { return float64(c.requests) }), l.name+"-req")
		if i == 0 {
			continue
		}
		b.ReportMetric(medianRatio(costs[0], c, func(c cost) time.Duration { return c.wall }), "×"+l.name)
		b.ReportMetric(slices.Min(each(costs[0], func(c cost) float64 { return float64(c.wall) }))/slices.Min(each(c, func(c cost) float64 { return float64(c.wall) })), "×"+l.name+"-min")
		b.ReportMetric(medianRatio(costs[0], c, func(c cost) time.Duration { return c.client + c.server }), "cpu×"+l.name)
	}
}

// measure runs l once.
func measure(b *testing.B, requests *atomic.Int64, server func() time.Duration, want int, l listing) cost {
	requests.Store(0)
	client, srv, start := processCPU(), server(), time.Now()
	n, err := l.list(b.Context())
	c := cost{wall: time.Since(start), client: processCPU() - client, server: server() - srv, requests: requests.Load()}
	if err != nil {
		b.Fatalf("%s: %v", l.name, err)
	}
	if n != want {
		b.Fatalf("%s listed %d documents, want %d", l.name, n, want)
	}
	return c
}

func each(cs []cost, f func(cost) float64) []float64 {
	v := make([]float64, len(cs))
	for i, c := range cs {
		v[i] = f(c)
	}
	return v
}

func median(cs []cost, f func(cost) float64) float64 { return medianOf(each(cs, f)) }

// medianRatio is the median over ops of f(a[op]) / f(b[op]).
func medianRatio(a, b []cost, f func(cost) time.Duration) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(f(a[i])) / float64(max(1, f(b[i])))
	}
	return medianOf(r)
}

func medianOf(v []float64) float64 {
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

func ms(ns float64) float64 { return ns / 1e6 }

// fill upserts rows documents in each of partitions partitions, from 16
// goroutines.
func fill(b *testing.B, s *etagstore.Store[Task], partitions, rows int) {
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for k := range keys {
				if _, err := s.Upsert(context.Background(), k, Task{Title: "document " + k, Owner: "someone", N: 42}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for p := range partitions {
		for r := range rows {
			keys <- fmt.Sprintf("user%04d/doc%d", p, r)
		}
	}
	close(keys)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// rawTask is Task as the hand-written loop decodes an entity: an
// Edm.Int64 property comes as a JSON string.
type rawTask struct {
	Title, Owner string
	Done         bool
	N            int64 `json:",string"`
}

// rawList is the hand-written listing: a ListEntities pager of top
// entities a page, each entity decoded into Task.
func rawList(ctx context.Context, client *aztables.Client, top int32) (int, error) {
	n := 0
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: &top})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, e := range page.Entities {
			var t rawTask
			if err := json.Unmarshal(e, &t); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// rawAfter is the hand-written loop for pages that resume after the last
// key shown (a stateless "next" link, as Store.Page's): one query of top
// entities a page, filtered on the key after.
func rawAfter(ctx context.Context, client *aztables.Client, top int32) (int, error) {
	n, pk, rk := 0, "", ""
	for {
		opts := &aztables.ListEntitiesOptions{Top: &top}
		if pk != "" {
			f := fmt.Sprintf("PartitionKey ge '%s' and (PartitionKey gt '%s' or RowKey gt '%s')", pk, pk, rk)
			opts.Filter = &f
		}
		page, err := client.NewListEntitiesPager(opts).NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, e := range page.Entities {
			var t struct {
				rawTask
				PartitionKey, RowKey string
			}
			if err := json.Unmarshal(e, &t); err != nil {
				return n, err
			}
			n, pk, rk = n+1, t.PartitionKey, t.RowKey
		}
		if len(page.Entities) < int(top) {
			return n, nil
		}
	}
}

func storeList(ctx context.Context, s *etagstore.Store[Task]) (int, error) {
	n := 0
	for _, err := range s.List(ctx, "") {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func storePages(ctx context.Context, s *etagstore.Store[Task], limit int) (int, error) {
	n, token := 0, ""
	for {
		p, err := s.Page(ctx, "", limit, token)
		if err != nil {
			return n, err
		}
		n += len(p.Docs)
		if token = p.Next; token == "" {
			return n, nil
		}
	}
}

// benchService is a table service client whose every request waits rtt
// before it is sent and is counted in requests (when not nil).
func benchService(b *testing.B, rtt time.Duration, requests *atomic.Int64) *aztables.ServiceClient {
	opts := &aztables.ClientOptions{}
	opts.Transport = delaying{rtt: rtt, requests: requests}
	svc, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// delaying is an HTTP transport that waits rtt before each request (the
// round trip to storage in another region) and counts requests.
type delaying struct {
	rtt      time.Duration
	requests *atomic.Int64
}

func (d delaying) Do(r *http.Request) (*http.Response, error) {
	if d.requests != nil {
		d.requests.Add(1)
	}
	if d.rtt > 0 {
		t := time.NewTimer(d.rtt)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	return http.DefaultClient.Do(r)
}
