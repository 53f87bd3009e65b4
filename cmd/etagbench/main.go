// Command etagbench measures etagstore against the loop users write today —
// read, write with If-Match, retry at once on 412 — in the same run, on
// memory, Azure Table and Azure Blob storage (Azurite works), and prints a
// Markdown table with every mode's ratio to the naive loop.
//
//	scripts/with-azurite go run ./cmd/etagbench              # all backends, ETAGSTORE_AZURITE from the script
//	go run ./cmd/etagbench -backends memory                  # no Azure needed
//
// Scenarios: 1, 4, 16 and 64 goroutines incrementing one hot key; 16
// writers in 4 processes on one hot key (-procs: other counts); 64 writers
// on distinct keys. Modes: naive (raw SDK calls), library (Store.Update
// with defaults: group commit and the version cache on), library without
// the version cache, library without group commit, and the blob lease
// Lock (get and replace under it). HTTP requests are counted by a
// counting transport.
//
// YCSB workload F (ycsb.go): 32 goroutines on 1,000 keys chosen with a
// zipfian distribution (s = 1.1), half reads and half read-modify-write
// increments; naive, library and library-nocache.
//
// Transfers (memory and table; transfers.go): as many goroutines as
// -writers says move 1 unit at a time between random accounts among 8 of
// one partition; naive is two Gets and a tablestore.Batch of two Replaces
// with their ETags, started again at once on 412; library is
// Store.Transact. Each cell checks every account's balance against the
// transfers that succeeded, and the total.
//
//	scripts/with-azurite go run ./cmd/etagbench -d 3s -backends table -writers 16 -only transfers -rtt 0,10ms
//
// Kanban (memory and table; kanban.go): -kanbanwriters goroutines (32)
// create cards on one board (one partition); a create writes the card,
// the board's count and a claim on the card's normalised title; 30%
// collide on a title and fail as "title taken" with nothing written.
// transact is etagstore.Transact over three Stores, envelope
// Store.Transact of one Store over a type holding all three, naive (tables
// only) GetEntity of the claim and the board and one SubmitTransaction,
// started again at once when the board moved. Each cell reports
// requests per create, entity group transactions sent and landed, runs of
// fn per create tried, and checks the board's count, the claims and the
// cards against the creates that succeeded.
//
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 10ms -only kanban
//
// Indexes (indexes.go). getby (memory and table): -getbyreaders
// goroutines (16) over -getbydocs documents (1,000) of one partition,
// indexed by a Unique email and a Lookup team of 20, read alternately by
// Get of a random key and GetBy of a random email, then by ListBy of a
// random team; every read checked. It reports reads/s, p50 and p99, GetBy's
// p99 over Get's, and requests per read, counted per operation.
//
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 10ms -only getby
//
// reindex (table only, and only when -only names it): -reindexdocs
// documents (100,000) in each of two fresh partitions; the raw aztables
// loop (list a page, batch-insert its claims 100 at a time) on one,
// Store.Reindex of a Unique index on the other, and Reindex again
// (-reindexagain=false leaves it out: at 100,000 documents it reads
// every entry, for long). On Azurite a query walks the whole table, so
// in one table the raw loop's claims are deleted before Reindex runs;
// -reindexowntables gives the raw loop and Reindex a fresh table each
// instead. It
// reports documents/s and the ratio to raw,
// requests, the time in batches and in queries, the heap's peak, and
// checks one claim or entry per document.
//
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 0 -only reindex -reindexagain=false
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 0 -only reindex -reindexdocs 10000
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 10ms -only reindex -reindexdocs 2000
//
// Outbox (table only, and only when -only names it; outbox.go): the
// targets of the transactional outbox (docs/outbox.md). commit: 1 and 16
// writers (-outboxwriters) commit transactions creating one order,
// without and with Outbox.Emit, requests per commit counted (target:
// Emit adds none); relay: -outboxevents events (2,000) of one partition
// relayed by RelayOnce in a loop, publishing each to Azure Queue storage
// (azqueue's EnqueueMessage of the Event's JSON), with OutboxOptions.InFlight
// 1 (the default) and 16, events/s and requests per event, storage and
// queue apart (target: ≥ 500/s at 10 ms); latency:
// Relay running (Poll from -outboxpoll) while writers commit at
// -outboxrate a second, commit→queue message p50 and p99 (target: p99 ≤
// 1 s at 10 ms). Every event is checked: published in order, once, and
// dequeued once.
//
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 0,10ms -only outbox -d 10s
//
// Expiry (table only, and only when -only names them; expiry.go). sweep:
// -sweepdocs documents (100,000) over -sweepparts partitions (100), 1%
// of them expired by the sweeping Store's clock (Options.Clock, two hours
// ahead); the raw aztables purger (list every entity, 1,000 a page, and
// DeleteEntity each expired one with If-Match) on one fresh table,
// Store.Sweep, then Sweep again with nothing due, on another. It reports
// seconds and requests with their ratios to raw's, the table-wide query
// pages, the queries of one partition, the deletes and the entity group
// transactions (each with the time it took), and checks every expired
// document gone, every live one there with exactly its expiry entry.
// sweeplag: SweepEvery(-sweepperiod, 1 min) while 32 goroutines create
// -sweeprate documents (10,000) a minute for -sweepfor (5 min), each
// expiring -sweepttl (30 s) after its create, by a clock -sweepscale
// times as fast as the real one (1: real time); it reports each
// document's lag, from its expiry to its delete's commit, at p50, p99 and
// its max, and the share deleted within 2 minutes.
//
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 0 -only sweep
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 0 -only sweeplag
//
// -rtt puts a loopback latency proxy (storetest.FaultProxy with only
// Latency set) in front of each Azurite endpoint, blob, table and queue:
// every request, the naive loop's and the library's alike, and those of
// the worker processes, waits that long before it is forwarded, as for
// storage in another region. -writers sets the writer counts of the
// one-process hot-key scenarios, -procs the process counts of the
// several-process one.
//
//	scripts/with-azurite go run ./cmd/etagbench -backends table -rtt 10ms -writers 16,64
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Counter is the benchmark's document.
type Counter struct {
	N    int64
	Note string
}

// only filters scenarios by name (-only).
var only string

// counting counts HTTP requests, and the successful writes among them. It
// sends them through azuritetest.Transport, which keeps up to 64 idle
// connections per host: http.DefaultClient keeps 2, and with dozens of
// goroutines most requests would then open a connection of their own,
// a cost that Azurite and the proxies pay again for every request.
type counting struct {
	n       atomic.Int64 // requests
	writes  atomic.Int64 // document writes answered 2xx (isDataWrite)
	batches atomic.Int64 // entity group transactions sent (isBatch)
	landed  atomic.Int64 // … answered with every action applied (batchLanded)
	// Table reads: of one entity (GET …(PartitionKey='…',RowKey='…')),
	// and queries (any other GET of a table's entities); among the
	// queries, scans: those whose filter names no PartitionKey, which the
	// service answers by walking every partition.
	pointReads, queries, scans atomic.Int64
	// deletes are DELETE requests (of one entity or blob; not a delete
	// inside an entity group transaction).
	deletes atomic.Int64
	// queryTime, scanTime, batchTime and deleteTime sum the time (ns)
	// the queries, the scans among them, the entity group transactions
	// and the deletes took, until their answers' headers came.
	queryTime, scanTime, batchTime, deleteTime atomic.Int64
	// received counts the bytes of the answers' bodies read.
	received atomic.Int64
}

// countedBody counts the bytes read of an answer's body in n.
type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (c *counting) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if op, ok := r.Context().Value(opRequestsKey{}).(*atomic.Int64); ok {
		op.Add(1)
	}
	t0 := time.Now()
	resp, err := azuritetest.Transport.Do(r)
	took := int64(time.Since(t0))
	if err == nil && resp.Body != nil {
		resp.Body = countedBody{resp.Body, &c.received}
	}
	if err == nil && isDataWrite(r) && resp.StatusCode/100 == 2 {
		c.writes.Add(1)
	}
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "(PartitionKey=") {
		c.pointReads.Add(1)
	} else if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "()") {
		c.queries.Add(1)
		c.queryTime.Add(took)
		if !strings.Contains(r.URL.Query().Get("$filter"), "PartitionKey") {
			c.scans.Add(1)
			c.scanTime.Add(took)
		}
	}
	if r.Method == http.MethodDelete {
		c.deletes.Add(1)
		c.deleteTime.Add(took)
	}
	if isBatch(r) {
		c.batches.Add(1)
		c.batchTime.Add(took)
		if err == nil && batchLanded(resp) {
			c.landed.Add(1)
		}
	}
	return resp, err
}

// opRequestsKey keys a context value *atomic.Int64 that counting adds
// each request made with that context to: the requests of one operation
// (withOpRequests), among others running at once.
type opRequestsKey struct{}

// withOpRequests is ctx counting its requests in n.
func withOpRequests(ctx context.Context, n *atomic.Int64) context.Context {
	return context.WithValue(ctx, opRequestsKey{}, n)
}

// isDataWrite tells a write of a document (PUT, POST, PATCH or MERGE) from
// a read, a delete, or a blob sub-resource operation (?comp=lease or
// ?comp=metadata: the lock mode's acquire, fencing token and release are
// PUTs too, but carry no commit).
func isDataWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodPut, http.MethodPost, http.MethodPatch, "MERGE":
		return !r.URL.Query().Has("comp")
	}
	return false
}

// env is one backend under test.
type env struct {
	name     string
	conn     string // the connection string, through the latency proxies under -rtt
	requests *counting
	// store returns a Store on a fresh key space for one cell, in a mode.
	store func(space, mode string) *etagstore.Store[Counter]
	// naive returns the raw-SDK increment of one key: one attempt, reporting
	// whether it committed (false on 412).
	naive func(space string) func(ctx context.Context, key string) (bool, error)
	// naiveRead returns the raw-SDK read of one key, decoded (ycsb.go).
	naiveRead func(space string) func(ctx context.Context, key string) (Counter, error)
	// transfer returns the hand-written transfer between two accounts of
	// space, the cell's Store s (see transfers.go); nil where the backend
	// has no multi-document transaction (blobs).
	transfer func(s *etagstore.Store[Counter], space string) naiveTransfer
	// backend returns the backend of a fresh key space, whose Stores commit
	// together (kanban.go); nil where there are no transactions (blobs).
	backend func(space string) driver.Backend
	// table is the table's client (nil on other backends).
	table *aztables.Client
	// locker is the lease Locker (nil where there is none).
	locker *blobstore.Locker
	// resource is the table or container name.
	resource string
	// drop deletes the table or container when this process made it
	// (open without a resource), and does nothing otherwise.
	drop func()
}

type result struct {
	Commits  int64     `json:"commits"`
	Attempts []int     `json:"attempts"` // per commit
	Latency  []float64 `json:"latency"`  // per commit, ms
	Requests int64     `json:"requests"`
	Writes   int64     `json:"writes"` // successful write requests (see isDataWrite)
	Seconds  float64   `json:"seconds"`
	Moved    []int64   `json:"moved,omitempty"` // transfers: net units in, by account, of the transfers that succeeded
}

// add counts one goroutine's commits: the attempts and latency (ms) of
// each. The caller serializes calls.
func (r *result) add(attempts []int, lat []float64) {
	r.Commits += int64(len(attempts))
	r.Attempts = append(r.Attempts, attempts...)
	r.Latency = append(r.Latency, lat...)
}

func main() {
	backends := flag.String("backends", "memory,table,blob", "backends to measure")
	dur := flag.Duration("d", 3*time.Second, "duration of each cell")
	worker := flag.String("worker", "", "internal: run as a worker process: backend/mode/space")
	flag.StringVar(&only, "only", "", "run only the scenarios whose name contains this")
	rttFlag := flag.String("rtt", "0", "latency added to every Azure request (table and blob) by a loopback proxy in front of Azurite; a comma-separated list runs everything once per value")
	writersFlag := flag.String("writers", "1,4,16,64", "writer counts of the one-process hot-key scenarios")
	procsFlag := flag.String("procs", "4", "process counts (of 4 writers each) of the several-process hot-key scenarios")
	flag.BoolVar(&printMetrics, "metrics", false, "also print the library's own OpenTelemetry metrics of every one-process library cell")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (YCSB-F workers carry a pprof label mode=<mode>)")
	flag.Parse()
	if *cpuprofile != "" {
		stop, err := profileCPU(*cpuprofile)
		if err != nil {
			log.Fatalf("-cpuprofile: %v", err)
		}
		defer stop()
	}
	conn := os.Getenv("ETAGSTORE_AZURITE")
	if *worker != "" {
		// The parent passes its proxied connection string in the environment.
		runWorker(conn, *worker, *dur)
		return
	}
	writers, err := parseWriters(*writersFlag)
	if err != nil {
		log.Fatalf("-writers: %v", err)
	}
	if procCounts, err = parseWriters(*procsFlag); err != nil {
		log.Fatalf("-procs: %v", err)
	}
	rtts, err := parseRTTs(*rttFlag)
	if err != nil {
		log.Fatalf("-rtt: %v", err)
	}
	for _, rtt := range rtts {
		c := conn
		if rtt > 0 && conn != "" {
			if c, err = withLatency(conn, rtt); err != nil {
				log.Fatalf("-rtt: %v", err)
			}
		}
		fmt.Printf("# etagbench: %s per cell, rtt %s (Azure backends), %s\n\n", *dur, rtt, time.Now().UTC().Format(time.RFC3339))
		for _, b := range strings.Split(*backends, ",") {
			if rtt > 0 && b == "memory" {
				continue // no round trip to lengthen
			}
			e, err := open(b, c, "")
			if err != nil {
				log.Fatalf("%s: %v", b, err)
			}
			bench(e, b, writers, *dur, rtt)
			if b == "blob" {
				benchLocks(e, *dur) // locks.go
			}
			e.drop() // the table or container this run made
		}
	}
}

func parseRTTs(list string) ([]time.Duration, error) {
	var ds []time.Duration
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "0" {
			ds = append(ds, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q is not a latency", f)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// procCounts are the process counts of the several-process hot-key
// scenarios (-procs).
var procCounts = []int{4}

func parseWriters(list string) ([]int, error) {
	var ws []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive writer count", f)
		}
		ws = append(ws, n)
	}
	return ws, nil
}

// withLatency starts one latency proxy per endpoint of conn (BlobEndpoint
// and TableEndpoint, and QueueEndpoint when there is one: the outbox
// scenario publishes to it) and returns conn with those endpoints pointing
// at the proxies. The proxies live as long as the process.
func withLatency(conn string, rtt time.Duration) (string, error) {
	parts := strings.Split(conn, ";")
	proxied := 0
	for i, kv := range parts {
		k, v, _ := strings.Cut(kv, "=")
		if k != "BlobEndpoint" && k != "TableEndpoint" && k != "QueueEndpoint" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("%s %q: not a URL", k, v)
		}
		p := storetest.StartFaultProxy(processTB{}, u.Scheme+"://"+u.Host, storetest.Faults{Latency: rtt})
		parts[i] = k + "=" + p.URL() + u.Path
		if k != "QueueEndpoint" {
			proxied++
		}
	}
	if proxied != 2 {
		return "", fmt.Errorf("ETAGSTORE_AZURITE needs both BlobEndpoint= and TableEndpoint=")
	}
	return strings.Join(parts, ";"), nil
}

// processTB is the testing.TB storetest.StartFaultProxy needs, outside a
// test: failures end the program, clean-ups are left to its exit. The
// embedded nil TB only supplies testing.TB's unexported method; the methods
// below are all StartFaultProxy calls.
type processTB struct{ testing.TB }

func (processTB) Helper()                           {}
func (processTB) Cleanup(func())                    {}
func (processTB) Log(args ...any)                   { log.Print(args...) }
func (processTB) Logf(format string, args ...any)   { log.Printf(format, args...) }
func (processTB) Error(args ...any)                 { log.Fatal(args...) }
func (processTB) Errorf(format string, args ...any) { log.Fatalf(format, args...) }
func (processTB) Fatal(args ...any)                 { log.Fatal(args...) }
func (processTB) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }

// open connects to backend; resource names the table or container to use
// ("" creates a fresh one).
func open(backend, conn, resource string) (*env, error) {
	e := &env{name: backend, conn: conn, requests: &counting{}, drop: func() {}}
	fresh := resource == ""
	if fresh {
		resource = fmt.Sprintf("bench%d", time.Now().UnixNano()%1e9)
	}
	e.resource = resource
	opts := azcore.ClientOptions{Transport: e.requests, Retry: policy.RetryOptions{RetryDelay: 20 * time.Millisecond}}
	switch backend {
	case "memory":
		mem := memstore.New(nil)
		e.store = func(space, mode string) *etagstore.Store[Counter] {
			return etagstore.New[Counter](prefixed{mem, space + "/"}, storeOptions(mode))
		}
		e.naive = func(space string) func(context.Context, string) (bool, error) {
			return func(ctx context.Context, key string) (bool, error) {
				it, err := mem.Read(ctx, space+"/"+key)
				if err != nil {
					return false, err
				}
				var c Counter
				_ = json.Unmarshal(it.Data, &c)
				c.N++
				data, _ := json.Marshal(c)
				_, err = mem.Write(ctx, space+"/"+key, driver.Write{Data: data, Cond: driver.IfMatch(it.ETag)})
				return conflictOK(err)
			}
		}
		e.transfer = func(_ *etagstore.Store[Counter], space string) naiveTransfer { return memoryTransfer(mem, space) }
		e.backend = func(space string) driver.Backend { return prefixed{mem, space + "/"} }
		e.naiveRead = func(space string) func(context.Context, string) (Counter, error) {
			return func(ctx context.Context, key string) (c Counter, err error) {
				it, err := mem.Read(ctx, space+"/"+key)
				if err == nil {
					err = json.Unmarshal(it.Data, &c)
				}
				return c, err
			}
		}
	case "table":
		if conn == "" {
			return nil, fmt.Errorf("set ETAGSTORE_AZURITE (run through scripts/with-azurite)")
		}
		svc, err := aztables.NewServiceClientFromConnectionString(conn, &aztables.ClientOptions{ClientOptions: opts})
		if err != nil {
			return nil, err
		}
		if _, err := svc.CreateTable(context.Background(), resource, nil); err != nil && !strings.Contains(err.Error(), "TableAlreadyExists") {
			return nil, err
		}
		client := svc.NewClient(resource)
		e.table = client
		e.backend = func(space string) driver.Backend {
			return tablestore.New(client, &tablestore.Options{Partition: space})
		}
		e.store = func(space, mode string) *etagstore.Store[Counter] {
			return tablestore.NewStore[Counter](client, &tablestore.Options{Partition: space}, storeOptions(mode))
		}
		e.naive = func(space string) func(context.Context, string) (bool, error) {
			return func(ctx context.Context, key string) (bool, error) {
				resp, err := client.GetEntity(ctx, space, key, nil)
				if err != nil {
					return false, err
				}
				var ent map[string]any
				_ = json.Unmarshal(resp.Value, &ent)
				n, _ := ent["N"].(string)
				var v int64
				fmt.Sscan(n, &v)
				ent["N"], ent["N@odata.type"] = fmt.Sprint(v+1), "Edm.Int64"
				body, _ := json.Marshal(ent)
				etag := resp.ETag
				_, err = client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
				return conflictOK(err)
			}
		}
		e.transfer = func(s *etagstore.Store[Counter], _ string) naiveTransfer { return tableTransfer(s) }
		e.naiveRead = func(space string) func(context.Context, string) (Counter, error) {
			return func(ctx context.Context, key string) (Counter, error) {
				resp, err := client.GetEntity(ctx, space, key, nil)
				if err != nil {
					return Counter{}, err
				}
				var ent struct{ N, Note string }
				err = json.Unmarshal(resp.Value, &ent)
				c := Counter{Note: ent.Note}
				fmt.Sscan(ent.N, &c.N)
				return c, err
			}
		}
		e.locker = lockerFor(conn, opts)
		if fresh {
			e.drop = func() {
				if _, err := svc.DeleteTable(context.Background(), resource, nil); err != nil {
					log.Printf("delete table %s: %v", resource, err)
				}
			}
		}
	case "blob":
		if conn == "" {
			return nil, fmt.Errorf("set ETAGSTORE_AZURITE (run through scripts/with-azurite)")
		}
		cc, err := containerFor(conn, opts, resource)
		if err != nil {
			return nil, err
		}
		if fresh {
			e.drop = func() {
				if _, err := cc.Delete(context.Background(), nil); err != nil {
					log.Printf("delete container %s: %v", resource, err)
				}
			}
		}
		e.store = func(space, mode string) *etagstore.Store[Counter] {
			return blobstore.NewStore[Counter](cc, &blobstore.Options{Prefix: space + "/"}, storeOptions(mode))
		}
		e.naive = func(space string) func(context.Context, string) (bool, error) {
			return naiveBlob(cc, space)
		}
		e.locker, _ = blobstore.NewLocker(cc, &blobstore.LockOptions{PollInitial: 5 * time.Millisecond, PollMax: 200 * time.Millisecond})
		e.naiveRead = func(space string) func(context.Context, string) (Counter, error) {
			return func(ctx context.Context, key string) (c Counter, err error) {
				resp, err := cc.NewBlockBlobClient(space+"/"+key).DownloadStream(ctx, nil)
				if err != nil {
					return c, err
				}
				defer resp.Body.Close()
				err = json.NewDecoder(resp.Body).Decode(&c)
				return c, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown backend %q", backend)
	}
	return e, nil
}

// storeOptions are the library modes' Store options: the defaults (the
// retry policy too: bounded by time, never by a count of attempts) but
// for what the mode names.
func storeOptions(mode string) *etagstore.Options {
	o := &etagstore.Options{DisableGroupCommit: mode == "library-nogroup"}
	if cellMetrics != nil {
		o.MeterProvider = cellMetrics.provider
	}
	if mode == "library-nocache" {
		o.CacheSize = -1 // the version cache is on by default
	}
	return o
}

func conflictOK(err error) (bool, error) {
	if err == nil {
		return true, nil
	}
	var re *azcore.ResponseError
	if (errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed) || errors.Is(err, etagstore.ErrConflict) {
		return false, nil
	}
	return false, err
}

func containerFor(conn string, opts azcore.ClientOptions, name string) (*container.Client, error) {
	c, err := azblob.NewClientFromConnectionString(conn, &azblob.ClientOptions{ClientOptions: opts})
	if err != nil {
		return nil, err
	}
	cc := c.ServiceClient().NewContainerClient(name)
	_, err = cc.Create(context.Background(), nil)
	if err != nil && !strings.Contains(err.Error(), "ContainerAlreadyExists") {
		return nil, err
	}
	return cc, nil
}

func lockerFor(conn string, opts azcore.ClientOptions) *blobstore.Locker {
	cc, err := containerFor(conn, opts, "benchlocks")
	if err != nil {
		log.Fatal(err)
	}
	l, _ := blobstore.NewLocker(cc, &blobstore.LockOptions{PollInitial: 5 * time.Millisecond, PollMax: 200 * time.Millisecond})
	return l
}

// cell runs writers goroutines on keys for d with one mode.
func cell(ctx context.Context, e *env, mode, space string, writers int, distinct bool, d time.Duration) result {
	key := func(w int) string {
		if distinct {
			return fmt.Sprintf("k%03d", w)
		}
		return "hot"
	}
	s := e.store(space, mode)
	keys := 1
	if distinct {
		keys = writers
	}
	// Seed the keys, 16 at a time (the cell's clock has not started).
	eachKey(keys, func(w int) {
		if _, err := s.Upsert(ctx, key(w), Counter{Note: "etagbench"}); err != nil {
			log.Fatal(err)
		}
	})
	var naive func(context.Context, string) (bool, error)
	if mode == "naive" {
		naive = e.naive(space)
	}
	var mu sync.Mutex
	var res result
	before, beforeWrites := e.requests.n.Load(), e.requests.writes.Load()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var attempts []int
			var lat []float64
			for time.Now().Before(deadline) {
				t0 := time.Now()
				tries := 0
				var err error
				switch mode {
				case "naive":
					for ok := false; !ok && err == nil; {
						tries++
						ok, err = naive(ctx, key(w))
					}
				case "lock":
					tries = 1
					var lk *blobstore.Lock
					if lk, err = e.locker.Lock(ctx, space+"-"+key(w)); err == nil {
						var doc etagstore.Doc[Counter]
						if doc, err = s.Get(lk.Context(), key(w)); err == nil {
							doc.Value.N++
							_, err = s.Replace(lk.Context(), doc)
						}
						_ = lk.Unlock(ctx)
					}
				default:
					_, err = s.Update(ctx, key(w), func(c *Counter) error { tries++; c.N++; return nil })
				}
				if err != nil {
					log.Fatalf("%s %s: %v", e.name, mode, err)
				}
				attempts = append(attempts, tries)
				lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
			}
			mu.Lock()
			res.add(attempts, lat)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Requests = e.requests.n.Load() - before
	res.Writes = e.requests.writes.Load() - beforeWrites
	// The counter check: every commit counted exactly once.
	var total atomic.Int64
	eachKey(keys, func(w int) {
		doc, err := s.Get(ctx, key(w))
		if err != nil {
			log.Fatal(err)
		}
		total.Add(doc.Value.N)
	})
	if total.Load() != res.Commits {
		log.Fatalf("%s %s %s: counter %d after %d commits", e.name, mode, space, total.Load(), res.Commits)
	}
	return res
}

// eachKey calls f for each of n keys' indexes, 16 at a time.
func eachKey(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, 16) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

type row struct {
	scenario, mode string
	r              result
}

// bench runs every scenario -only selects on backend e and prints their
// tables; rtt is the latency the proxies add (0: none).
func bench(e *env, backend string, writers []int, d time.Duration, rtt time.Duration) {
	ctx := context.Background()
	modes := []string{"naive", "library", "library-nocache", "library-nogroup"}
	if e.locker != nil {
		modes = append(modes, "lock")
	}
	type scen struct {
		name     string
		writers  int
		distinct bool
		procs    int
	}
	var scens []scen
	for _, w := range writers {
		name := fmt.Sprintf("hot key, %d writers", w)
		if w == 1 {
			name = "hot key, 1 writer"
		}
		scens = append(scens, scen{name, w, false, 1})
	}
	for _, p := range procCounts {
		scens = append(scens, scen{fmt.Sprintf("hot key, %d processes × 4 writers", p), 4, false, p})
	}
	scens = append(scens, scen{"64 writers, distinct keys", 64, true, 1})
	var rows []row
	var summaries []string
	for i, sc := range scens {
		if sc.procs > 1 && backend == "memory" {
			continue // memory is not shared between processes
		}
		if !strings.Contains(sc.name, only) {
			continue
		}
		for _, m := range modes {
			if m == "lock" && (sc.distinct || sc.writers > 16 || sc.procs > 1) {
				continue // the lock's 15 s minimum lease makes these cells minutes long
			}
			if m == "library-nogroup" && sc.writers == 1 && !sc.distinct {
				continue
			}
			space := fmt.Sprintf("s%d%s", i, strings.NewReplacer("-", "", "+", "").Replace(m))
			var r result
			if sc.procs > 1 {
				s := e.store(space, "library")
				if _, err := s.Upsert(ctx, "hot", Counter{Note: "etagbench"}); err != nil {
					log.Fatal(err)
				}
				r = multiProcess(e.conn, backend+"/"+m+"/"+space+"/"+e.resource, sc.procs, d)
				if doc, err := s.Get(ctx, "hot"); err != nil || doc.Value.N != r.Commits {
					log.Fatalf("%s %s %s: counter %d after %d commits (%v)", backend, m, space, doc.Value.N, r.Commits, err)
				}
			} else {
				if printMetrics && strings.HasPrefix(m, "library") {
					cellMetrics = newMetricsCell()
				}
				r = cell(ctx, e, m, space, sc.writers, sc.distinct, d)
				if cellMetrics != nil {
					summaries = append(summaries, fmt.Sprintf("- %s / %s: %s", sc.name, m, cellMetrics.summary()))
					cellMetrics = nil
				}
			}
			rows = append(rows, row{sc.name, m, r})
			fmt.Fprintf(os.Stderr, "%s / %s / %s: %.0f commits/s\n", backend, sc.name, m, float64(r.Commits)/r.Seconds)
		}
	}
	rows = append(rows, transferRows(ctx, e, backend, writers, d)...)
	rows = append(rows, ycsbRows(ctx, e, backend, d)...)
	kanban := kanbanRows(ctx, e, backend, d) // kanban.go
	defer printKanban(backend, kanban, rtt)
	getby := getbyRows(ctx, e, d) // indexes.go
	reindex := reindexRows(ctx, e)
	outbox := outboxRows(ctx, e, d, os.Getenv("ETAGSTORE_AZURITE")) // outbox.go
	sweep, lag := sweepRows(ctx, e), lagRows(ctx, e)                // expiry.go
	defer func() {
		printGetBy(backend, getby)
		printReindex(backend, reindex)
		printOutbox(backend, outbox)
		printSweep(backend, sweep)
		printLag(backend, lag)
	}()
	if len(rows) == 0 {
		return // -only left none of these scenarios
	}
	fmt.Printf("## %s\n\n| scenario | mode | commits/s | × naive | requests/commit | commits/write | p50 ms | p99 ms | worst attempts | counter |\n|---|---|---|---|---|---|---|---|---|---|\n", backend)
	naive := map[string]float64{}
	for _, r := range rows {
		if r.mode == "naive" {
			naive[r.scenario] = float64(r.r.Commits) / r.r.Seconds
		}
	}
	for _, r := range rows {
		cps := float64(r.r.Commits) / r.r.Seconds
		ratio := "—"
		if n := naive[r.scenario]; n > 0 {
			ratio = fmt.Sprintf("%.2f", cps/n)
		}
		rpc, batch := "—", "—"
		if backend != "memory" && r.r.Commits > 0 {
			rpc = fmt.Sprintf("%.2f", float64(r.r.Requests)/float64(r.r.Commits))
		}
		if backend != "memory" && r.r.Writes > 0 {
			batch = fmt.Sprintf("%.2f", float64(r.r.Commits)/float64(r.r.Writes))
		}
		fmt.Printf("| %s | %s | %.0f | %s | %s | %s | %.2f | %.2f | %d | exact (%d) |\n", r.scenario, r.mode, cps, ratio, rpc, batch,
			pct(r.r.Latency, 50), pct(r.r.Latency, 99), slices.Max(append(r.r.Attempts, 0)), r.r.Commits)
	}
	fmt.Println()
	if len(summaries) > 0 {
		fmt.Printf("Metrics the library recorded (-metrics), %s:\n\n%s\n\n", backend, strings.Join(summaries, "\n"))
	}
}

func pct(v []float64, p int) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// multiProcess runs procs worker processes of 4 writers each on one hot key.
// The workers get conn, the parent's connection string (through its latency
// proxies under -rtt), in ETAGSTORE_AZURITE.
func multiProcess(conn, spec string, procs int, d time.Duration) result {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var total result
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			cmd := exec.Command(self, "-d", d.String(), "-worker", spec)
			cmd.Env = append(os.Environ(), "ETAGSTORE_AZURITE="+conn)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				log.Fatalf("worker: %v", err)
			}
			var r result
			if err := json.Unmarshal(out, &r); err != nil {
				log.Fatalf("worker output: %v", err)
			}
			mu.Lock()
			total.Commits += r.Commits
			total.Requests += r.Requests
			total.Writes += r.Writes
			total.Attempts = append(total.Attempts, r.Attempts...)
			total.Latency = append(total.Latency, r.Latency...)
			total.Seconds = max(total.Seconds, r.Seconds)
			if r.Moved != nil && total.Moved == nil {
				total.Moved = make([]int64, len(r.Moved))
			}
			if r.Moved != nil {
				for i, n := range r.Moved {
					total.Moved[i] += n
				}
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// runWorker is one process of the multi-process scenario: 4 writers on the
// shared hot key of space; it prints its result as JSON. The parent checks
// nothing of the counter (the processes share it); each worker checks that
// it ended at least at its own commits.
func runWorker(conn, spec string, d time.Duration) {
	parts := strings.SplitN(spec, "/", 4)
	e, err := open(parts[0], conn, parts[3])
	if err != nil {
		log.Fatal(err)
	}
	if strings.HasPrefix(parts[1], "locks-") {
		runLockWorker(e, parts[1], parts[2], d)
		return
	}
	var r result
	if mode, ok := strings.CutPrefix(parts[1], "transfers-"); ok {
		r = transferCell(context.Background(), e, mode, parts[2], 4, d)
	} else {
		r = cellShared(context.Background(), e, parts[1], parts[2], 4, d)
	}
	// Each process's share and tail, on the progress output: a process
	// starved by the others shows here, not in the pooled row.
	fmt.Fprintf(os.Stderr, "  worker %d, %s: %d commits, p50 %.0f ms, p99 %.0f ms, max %.0f ms\n", os.Getpid(), parts[1], r.Commits, pct(r.Latency, 50), pct(r.Latency, 99), pct(r.Latency, 100))
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// cellShared is cell without seeding or the exact check (other processes
// write the same key).
func cellShared(ctx context.Context, e *env, mode, space string, writers int, d time.Duration) result {
	s := e.store(space, mode)
	var naive func(context.Context, string) (bool, error)
	if mode == "naive" {
		naive = e.naive(space)
	}
	var mu sync.Mutex
	var res result
	before, beforeWrites := e.requests.n.Load(), e.requests.writes.Load()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				tries := 0
				var err error
				if mode == "naive" {
					for ok := false; !ok && err == nil; {
						tries++
						ok, err = naive(ctx, "hot")
					}
				} else {
					_, err = s.Update(ctx, "hot", func(c *Counter) error { tries++; c.N++; return nil })
				}
				if err != nil {
					log.Fatal(err)
				}
				mu.Lock()
				res.Commits++
				res.Attempts = append(res.Attempts, tries)
				res.Latency = append(res.Latency, float64(time.Since(t0).Microseconds())/1000)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Requests = e.requests.n.Load() - before
	res.Writes = e.requests.writes.Load() - beforeWrites
	return res
}

// prefixed puts a memstore's keys of one cell under a prefix.
type prefixed struct {
	*memstore.Backend
	prefix string
}

// Abilities are memstore's, with Commit and CheckCommit (transactions)
// and ReadMany (Reindex's repair reads documents with it) on the cell's
// keys.
func (p prefixed) Abilities() driver.Abilities {
	ab := p.Backend.Abilities()
	if commit := ab.Commit; commit != nil {
		ab.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
			return commit(ctx, p.keyed(actions))
		}
	}
	if check := ab.CheckCommit; check != nil {
		ab.CheckCommit = func(actions []driver.Action) error { return check(p.keyed(actions)) }
	}
	if many := ab.ReadMany; many != nil {
		ab.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
			full := make([]string, len(keys))
			for i, k := range keys {
				full[i] = p.prefix + k
			}
			items, err := many(ctx, full)
			for i := range items {
				items[i].Key = strings.TrimPrefix(items[i].Key, p.prefix)
			}
			return items, err
		}
	}
	return ab
}

func (p prefixed) keyed(actions []driver.Action) []driver.Action {
	out := slices.Clone(actions)
	for i := range out {
		out[i].Key = p.prefix + out[i].Key
	}
	return out
}

func (p prefixed) Read(ctx context.Context, key string) (driver.Item, error) {
	it, err := p.Backend.Read(ctx, p.prefix+key)
	it.Key = strings.TrimPrefix(it.Key, p.prefix)
	return it, err
}

func (p prefixed) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	return p.Backend.Write(ctx, p.prefix+key, w)
}

func (p prefixed) Delete(ctx context.Context, key string, etag driver.ETag) error {
	return p.Backend.Delete(ctx, p.prefix+key, etag)
}

func (p prefixed) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	if after != "" {
		after = p.prefix + after
	}
	items, more, err := p.Backend.ListPage(ctx, p.prefix+prefix, after, limit)
	for i := range items {
		items[i].Key = strings.TrimPrefix(items[i].Key, p.prefix)
	}
	return items, more, err
}

func (p prefixed) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		for it, err := range p.Backend.List(ctx, p.prefix+prefix) {
			it.Key = strings.TrimPrefix(it.Key, p.prefix)
			if !yield(it, err) {
				return
			}
		}
	}
}

// naiveBlob is the hand-written blob loop: download, then upload with If-Match.
func naiveBlob(cc *container.Client, space string) func(context.Context, string) (bool, error) {
	return func(ctx context.Context, key string) (bool, error) {
		bc := cc.NewBlockBlobClient(space + "/" + key)
		resp, err := bc.DownloadStream(ctx, nil)
		if err != nil {
			return false, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return false, err
		}
		var c Counter
		_ = json.Unmarshal(data, &c)
		c.N++
		data, _ = json.Marshal(c)
		_, err = bc.UploadBuffer(ctx, data, &azblob.UploadBufferOptions{AccessConditions: &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: resp.ETag}}})
		return conflictOK(err)
	}
}

// profileCPU starts a CPU profile written to path; stop ends it.
func profileCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Printf("-cpuprofile: %v", err)
		}
	}, nil
}
