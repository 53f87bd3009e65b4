package tablestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
// alternating order, so that the machine's load falls on both alike; the
// metrics are each one's milliseconds per listing, the library's ratio to
// each raw loop, and HTTP requests per listing. It runs at loopback and
// with 10 ms added before every request (a delaying transport, as
// etagbench -rtt does with a proxy):
//
//	scripts/with-azurite go test -run '^$' -bench ListAcrossPartitions -benchtime 3x -count 5 ./tablestore/
func BenchmarkListAcrossPartitions(b *testing.B) {
	const partitions, rows = 2000, 2
	svc := benchService(b, 0, nil)
	name := azuritetest.Name("list")
	if _, err := svc.CreateTable(b.Context(), name, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), name, nil) })
	fill(b, tablestore.NewStore[Task](svc.NewClient(name), nil, nil), partitions, rows)

	for _, rtt := range []time.Duration{0, 10 * time.Millisecond} {
		var requests atomic.Int64
		client := benchService(b, rtt, &requests).NewClient(name)
		s := tablestore.NewStore[Task](client, nil, nil)
		cell := func(name string, listings ...listing) {
			b.Run(fmt.Sprintf("rtt=%v/%s", rtt, name), func(b *testing.B) {
				compare(b, &requests, partitions*rows, listings)
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

// compare runs each of listings (the library's first, then raw loops)
// once per op, in an order that rotates from op to op, checks that each
// read want documents, and reports each one's milliseconds and requests
// per listing and the first one's ratio to each of the others.
func compare(b *testing.B, requests *atomic.Int64, want int, listings []listing) {
	spent := make([]time.Duration, len(listings))
	reqs := make([]int64, len(listings))
	ops := 0
	for b.Loop() {
		for j := range listings {
			i := (ops + j) % len(listings)
			requests.Store(0)
			start := time.Now()
			n, err := listings[i].list(b.Context())
			spent[i] += time.Since(start)
			reqs[i] += requests.Load()
			if err != nil {
				b.Fatalf("%s: %v", listings[i].name, err)
			}
			if n != want {
				b.Fatalf("%s listed %d documents, want %d", listings[i].name, n, want)
			}
		}
		ops++
	}
	for i, l := range listings {
		b.ReportMetric(float64(spent[i].Milliseconds())/float64(ops), l.name+"-ms")
		b.ReportMetric(float64(reqs[i])/float64(ops), l.name+"-req")
		if i > 0 {
			b.ReportMetric(float64(spent[0])/float64(spent[i]), "×"+l.name)
		}
	}
}

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
