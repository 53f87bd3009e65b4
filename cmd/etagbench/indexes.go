package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/tablestore"
)

// The index scenarios (this file): the targets of unique and lookup
// indexes (docs/indexes.md).
//
// getby (memory and table): -getbydocs documents (1,000) of one
// partition, each with a unique email (a Unique index) and a team of 20
// (a Lookup index), seeded in batches by a Store without indexes and then
// indexed by Store.Reindex. -getbyreaders goroutines (16) then read, for
// the cell's duration, alternately a random key by Get and a random
// document's email by GetBy; then, for another cell's duration, a random
// team by ListBy. Every read is checked (GetBy: the document holding the
// email; ListBy: exactly the team's documents). Columns: reads/s, p50 and
// p99 ms, p99 as a multiple of Get's (target: GetBy ≤ 2.5 at 10 ms), and
// requests per read (target: GetBy ≤ 2; ListBy one query of the entries
// and the documents' reads), counted per operation by the counting
// transport through the operation's context.
//
// reindex (table only, and only when -only names it: it writes 2 ×
// -reindexdocs documents): -reindexdocs documents (100,000) seeded in
// two fresh partitions, in batches of 100 by a Store without indexes.
// raw is the loop a user writes with aztables: ListEntities of the
// partition's documents page by page (1,000 a page), and for each page
// SubmitTransaction of batches of up to 100 inserts of claim entities,
// one per document, keyed by its email. Reindex is Store.Reindex of a
// Unique email index over the other partition: one entry per document,
// the same work. Reindex again is its second, idempotent run (every entry
// already there). In one table, raw's claims are deleted before Reindex
// runs, so that both walk the same table (on Azurite every query walks
// the whole table). With -reindexowntables each runs in a fresh table of
// its own, seeded alike. Columns: documents per second and its ratio to raw's
// (target: ≥ 0.8), seconds, requests (all of them), and among them the
// entity group transactions and the time they took (summed over
// requests, until each answer's headers came), the queries (listings,
// ReadMany) and their time, and the point reads (GetEntity), and the
// process's heap (HeapInuse, sampled
// every 10 ms; after a GC at the start) at its peak and at the start:
// the peak of a bounded pass stays flat as -reindexdocs grows. Each pass
// is then checked: every document has its claim or entry, naming it, and
// nothing else is there; GetBy of 100 random emails finds their
// documents.

var (
	getbyDocs    = flag.Int("getbydocs", 1000, "documents of the getby scenario")
	getbyReaders = flag.Int("getbyreaders", 16, "goroutines of the getby scenario")
	reindexDocs  = flag.Int("reindexdocs", 100000, "documents of the reindex scenario (table only; run when -only names it)")
	reindexAgain = flag.Bool("reindexagain", true, "also run the reindex scenario's second, idempotent pass (which reads every entry: long at 100,000 documents)")
	reindexOwn   = flag.Bool("reindexowntables", false, "give the reindex scenario's raw loop and Reindex a fresh table each, of the same content, instead of two partitions of the shared table")
)

// teamSize is how many documents hold each value of the team index.
const teamSize = 20

// User is the index scenarios' document.
type User struct {
	Email string
	Team  string
	Name  string
}

var (
	byEmail = etagstore.Unique("email", func(u User) string { return u.Email })
	byTeam  = etagstore.Lookup("team", func(u User) []string { return []string{u.Team} })
)

func userKey(i int) string { return fmt.Sprintf("u%07d", i) }

// userOf is the i-th document: its email holds characters no key may.
func userOf(i int) User {
	return User{Email: fmt.Sprintf("User.%d+bench@Example.com/?#", i), Team: teamOf(i / teamSize), Name: fmt.Sprintf("User %d", i)}
}

func teamOf(t int) string { return fmt.Sprintf("team-%05d", t) }

// userIndex is the i of userKey(i).
func userIndex(key string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(key, "u"))
	return n, err == nil && strings.HasPrefix(key, "u") && userKey(n) == key
}

// seedUsers creates n documents on b with a Store without indexes: on
// tables in batches of 100, 16 at a time.
func seedUsers(ctx context.Context, e *env, b driver.Backend, n int) {
	s := etagstore.New[User](b, nil)
	if e.table == nil {
		eachKey(n, func(i int) {
			if _, err := s.Create(ctx, userKey(i), userOf(i)); err != nil {
				log.Fatalf("%s seed: %v", e.name, err)
			}
		})
		return
	}
	eachKey((n+tablestore.MaxBatchActions-1)/tablestore.MaxBatchActions, func(j int) {
		batch := tablestore.NewBatch(s)
		for i := j * tablestore.MaxBatchActions; i < min(n, (j+1)*tablestore.MaxBatchActions); i++ {
			batch.Create(userKey(i), userOf(i))
		}
		if _, err := batch.Submit(ctx); err != nil {
			log.Fatalf("%s seed: %v", e.name, err)
		}
	})
}

// indexRow is one row of the index tables.
type indexRow struct {
	scenario, op string
	ops          int64
	seconds      float64
	latency      []float64 // ms, per operation
	requests     int64     // counted per operation
	check        string
	// reindex
	batches, queries, pointReads int64
	queryTime, batchTime         time.Duration // summed over requests, until their answers' headers came
	heapPeak, heapBase           uint64
}

// opLog is one goroutine's operations of one kind.
type opLog struct {
	n        int64
	requests int64
	latency  []float64
}

func (l *opLog) add(o opLog) {
	l.n += o.n
	l.requests += o.requests
	l.latency = append(l.latency, o.latency...)
}

// timed runs op once, counting its requests and latency in l.
func (l *opLog) timed(ctx context.Context, op func(ctx context.Context)) {
	var n atomic.Int64
	t0 := time.Now()
	op(withOpRequests(ctx, &n))
	l.latency = append(l.latency, float64(time.Since(t0).Microseconds())/1000)
	l.n++
	l.requests += n.Load()
}

// getbyRows runs the getby scenario on backends with entries.
func getbyRows(ctx context.Context, e *env, d time.Duration) []indexRow {
	n, readers := *getbyDocs, *getbyReaders
	name := fmt.Sprintf("getby, %d readers, %d documents", readers, n)
	if e.backend == nil || !strings.Contains(name, only) {
		return nil
	}
	if n < teamSize {
		log.Fatalf("-getbydocs %d: at least %d", n, teamSize)
	}
	b := e.backend(fmt.Sprintf("getby%d", time.Now().UnixNano()%1e6))
	t0 := time.Now()
	seedUsers(ctx, e, b, n)
	seeded := time.Since(t0)
	s := etagstore.New(b, nil, byEmail, byTeam)
	for _, idx := range []etagstore.Index[User]{byEmail, byTeam} {
		if err := s.Reindex(ctx, idx); err != nil {
			log.Fatalf("%s getby: %v", e.name, err)
		}
	}
	fmt.Fprintf(os.Stderr, "%s / %s: seeded in %.1f s, indexed (Reindex of both) in %.1f s\n", e.name, name, seeded.Seconds(), (time.Since(t0) - seeded).Seconds())

	// Get and GetBy, alternately.
	var mu sync.Mutex
	var gets, getbys opLog
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range readers {
		wg.Go(func() {
			var g, gb opLog
			for i := w; time.Now().Before(deadline); i++ {
				k := rand.IntN(n)
				if i%2 == 0 {
					g.timed(ctx, func(ctx context.Context) {
						doc, err := s.Get(ctx, userKey(k))
						if err != nil || doc.Value != userOf(k) {
							log.Fatalf("%s getby: Get %q: %+v, %v", e.name, userKey(k), doc.Value, err)
						}
					})
					continue
				}
				gb.timed(ctx, func(ctx context.Context) {
					doc, err := s.GetBy(ctx, byEmail, userOf(k).Email)
					if err != nil || doc.Key != userKey(k) || doc.Value != userOf(k) {
						log.Fatalf("%s getby: GetBy %q: %q %+v, %v", e.name, userOf(k).Email, doc.Key, doc.Value, err)
					}
				})
			}
			mu.Lock()
			defer mu.Unlock()
			gets.add(g)
			getbys.add(gb)
		})
	}
	wg.Wait()
	mixed := time.Since(start).Seconds()

	// ListBy of a random team.
	teams := (n + teamSize - 1) / teamSize
	var lists opLog
	var listed atomic.Int64
	start = time.Now()
	deadline = start.Add(d)
	for range readers {
		wg.Go(func() {
			var l opLog
			for time.Now().Before(deadline) {
				t := rand.IntN(teams)
				want := min(teamSize, n-t*teamSize)
				l.timed(ctx, func(ctx context.Context) {
					got := 0
					for doc, err := range s.ListBy(ctx, byTeam, teamOf(t)) {
						k, ok := userIndex(doc.Key)
						if err != nil || !ok || k/teamSize != t || doc.Value != userOf(k) {
							log.Fatalf("%s getby: ListBy %q yields %q %+v, %v", e.name, teamOf(t), doc.Key, doc.Value, err)
						}
						got++
					}
					if got != want {
						log.Fatalf("%s getby: ListBy %q yields %d documents, want %d", e.name, teamOf(t), got, want)
					}
					listed.Add(int64(got))
				})
			}
			mu.Lock()
			defer mu.Unlock()
			lists.add(l)
		})
	}
	wg.Wait()
	listing := time.Since(start).Seconds()
	return []indexRow{
		{scenario: name, op: "Get", ops: gets.n, seconds: mixed, latency: gets.latency, requests: gets.requests,
			check: fmt.Sprintf("exact (%d reads)", gets.n)},
		{scenario: name, op: "GetBy (unique)", ops: getbys.n, seconds: mixed, latency: getbys.latency, requests: getbys.requests,
			check: fmt.Sprintf("exact (%d reads)", getbys.n)},
		{scenario: name, op: fmt.Sprintf("ListBy (lookup, %d a value)", teamSize), ops: lists.n, seconds: listing, latency: lists.latency, requests: lists.requests,
			check: fmt.Sprintf("exact (%d lists, %d documents)", lists.n, listed.Load())},
	}
}

// printGetBy prints the getby rows of backend.
func printGetBy(backend string, rows []indexRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("## %s: getby\n\n| scenario | operation | reads/s | p50 ms | p99 ms | p99 × Get's | requests/read | check |\n|---|---|---|---|---|---|---|---|\n", backend)
	getP99 := 0.0
	for _, r := range rows {
		if r.op == "Get" {
			getP99 = pct(r.latency, 99)
		}
	}
	for _, r := range rows {
		ratio, rpo := "—", "—"
		if getP99 > 0 && strings.HasPrefix(r.op, "GetBy") {
			ratio = fmt.Sprintf("%.2f", pct(r.latency, 99)/getP99)
		}
		if backend != "memory" && r.ops > 0 {
			rpo = fmt.Sprintf("%.2f", float64(r.requests)/float64(r.ops))
		}
		fmt.Printf("| %s | %s | %.0f | %.2f | %.2f | %s | %s | %s |\n", r.scenario, r.op, float64(r.ops)/r.seconds,
			pct(r.latency, 50), pct(r.latency, 99), ratio, rpo, r.check)
	}
	fmt.Println()
}

// reindexRows runs the reindex scenario on tables, when -only names it.
func reindexRows(ctx context.Context, e *env) []indexRow {
	n := *reindexDocs
	name := fmt.Sprintf("reindex, %d documents", n)
	if e.table == nil || only == "" || !strings.Contains(name, only) {
		return nil
	}
	stamp := time.Now().UnixNano() % 1e6
	rawSpace, libSpace := fmt.Sprintf("reindexraw%d", stamp), fmt.Sprintf("reindexlib%d", stamp)
	rawTable, libTable := e.table, e.table
	if *reindexOwn {
		var dropRaw, dropLib func()
		rawTable, dropRaw = freshTable(e, rawSpace)
		defer dropRaw()
		libTable, dropLib = freshTable(e, libSpace)
		defer dropLib()
		name += ", a table each"
	}
	t0 := time.Now()
	seedUsers(ctx, e, tablestore.New(rawTable, &tablestore.Options{Partition: rawSpace}), n)
	seedUsers(ctx, e, tablestore.New(libTable, &tablestore.Options{Partition: libSpace}), n)
	fmt.Fprintf(os.Stderr, "%s / %s: seeded 2 × %d documents in %.1f s\n", e.name, name, n, time.Since(t0).Seconds())

	var rows []indexRow
	claims := 0
	raw := measurePass(e, func() (err error) {
		claims, err = rawReindex(ctx, rawTable, rawSpace)
		return err
	})
	if claims != n {
		log.Fatalf("%s reindex: the raw loop met %d documents, want %d", e.name, claims, n)
	}
	raw.scenario, raw.op, raw.ops = name, "raw (scan, batch-insert claims)", int64(n)
	raw.check = checkClaims(ctx, rawTable, rawSpace, n)
	rows = append(rows, raw)
	fmt.Fprintf(os.Stderr, "%s / %s / raw: %.1f s\n", e.name, name, raw.seconds)
	if rawTable == libTable {
		deleteClaims(ctx, rawTable, rawSpace) // Reindex walks the table raw walked
	}

	b := tablestore.New(libTable, &tablestore.Options{Partition: libSpace})
	s := etagstore.New(b, nil, byEmail)
	passes := []string{"Reindex", "Reindex again (idempotent)"}
	if !*reindexAgain {
		passes = passes[:1]
	}
	for _, op := range passes {
		r := measurePass(e, func() error { return s.Reindex(ctx, byEmail) })
		r.scenario, r.op, r.ops = name, op, int64(n)
		r.check = checkEntries(ctx, b, s, n)
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "%s / %s / %s: %.1f s\n", e.name, name, op, r.seconds)
	}
	return rows
}

// measurePass runs pass, timing it and counting its requests, and samples
// the heap meanwhile.
func measurePass(e *env, pass func() error) indexRow {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r := indexRow{heapBase: ms.HeapInuse, heapPeak: ms.HeapInuse}
	var peak atomic.Uint64
	peak.Store(ms.HeapInuse)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	c := e.requests
	before, beforeBatches, beforeQueries, beforeReads := c.n.Load(), c.batches.Load(), c.queries.Load(), c.pointReads.Load()
	beforeQueryTime, beforeBatchTime := c.queryTime.Load(), c.batchTime.Load()
	t0 := time.Now()
	err := pass()
	r.seconds = time.Since(t0).Seconds()
	r.requests, r.batches = c.n.Load()-before, c.batches.Load()-beforeBatches
	r.queries, r.pointReads = c.queries.Load()-beforeQueries, c.pointReads.Load()-beforeReads
	r.queryTime, r.batchTime = time.Duration(c.queryTime.Load()-beforeQueryTime), time.Duration(c.batchTime.Load()-beforeBatchTime)
	close(stop)
	<-done
	r.heapPeak = peak.Load()
	if err != nil {
		log.Fatalf("%s reindex: %v", e.name, err)
	}
	return r
}

// claimPrefix starts the RowKey of the raw loop's claims: "~" sorts after
// every document's key (u…).
const claimPrefix = "~email."

// rawReindex is the loop a user writes with aztables to give every
// document of partition a claim on its email: ListEntities page by page,
// and SubmitTransaction of each page's claims, 100 at a time. It returns
// how many documents it met.
func rawReindex(ctx context.Context, client *aztables.Client, partition string) (int, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey lt '~'", partition)
	top := int32(1000)
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top})
	docs := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return docs, err
		}
		var batch []aztables.TransactionAction
		send := func() error {
			if len(batch) == 0 {
				return nil
			}
			_, err := client.SubmitTransaction(ctx, batch, nil)
			batch = batch[:0]
			return err
		}
		for _, raw := range page.Entities {
			var doc struct{ RowKey, Email string }
			if err := json.Unmarshal(raw, &doc); err != nil {
				return docs, err
			}
			docs++
			claim, _ := json.Marshal(map[string]string{
				"PartitionKey": partition,
				"RowKey":       claimPrefix + base64.RawURLEncoding.EncodeToString([]byte(doc.Email)),
				"Value":        doc.Email,
				"Doc":          doc.RowKey,
			})
			batch = append(batch, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: claim})
			if len(batch) == tablestore.MaxBatchActions {
				if err := send(); err != nil {
					return docs, err
				}
			}
		}
		if err := send(); err != nil {
			return docs, err
		}
	}
	return docs, nil
}

// checkClaims checks that partition holds one claim per document, naming
// it, and no other.
func checkClaims(ctx context.Context, client *aztables.Client, partition string, n int) string {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s'", partition, claimPrefix)
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	seen := make([]bool, n)
	count := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			log.Fatalf("reindex: claims: %v", err)
		}
		for _, raw := range page.Entities {
			var c struct{ RowKey, Value, Doc string }
			if err := json.Unmarshal(raw, &c); err != nil {
				log.Fatalf("reindex: claim: %v", err)
			}
			k, ok := userIndex(c.Doc)
			if !ok || k >= n || seen[k] || c.Value != userOf(k).Email || c.RowKey != claimPrefix+base64.RawURLEncoding.EncodeToString([]byte(c.Value)) {
				log.Fatalf("reindex: claim %q names %q (%q)", c.RowKey, c.Doc, c.Value)
			}
			seen[k] = true
			count++
		}
	}
	if count != n {
		log.Fatalf("reindex: %d claims for %d documents", count, n)
	}
	return fmt.Sprintf("exact (%d claims)", count)
}

// deleteClaims deletes the raw loop's claims in partition, 100 to a
// batch, so that the table holds what it held before the raw loop ran.
func deleteClaims(ctx context.Context, client *aztables.Client, partition string) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s'", partition, claimPrefix)
	sel := "PartitionKey,RowKey"
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: &sel})
	var batch []aztables.TransactionAction
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			log.Fatalf("reindex: claims: %v", err)
		}
		batch = batch[:0]
		for _, raw := range page.Entities {
			batch = append(batch, aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: raw})
			if len(batch) == tablestore.MaxBatchActions {
				if _, err := client.SubmitTransaction(ctx, batch, nil); err != nil {
					log.Fatalf("reindex: deleting claims: %v", err)
				}
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			if _, err := client.SubmitTransaction(ctx, batch, nil); err != nil {
				log.Fatalf("reindex: deleting claims: %v", err)
			}
		}
	}
}

// checkEntries checks that b holds one entry of the email index per
// document, naming it, and no other (listed raw), and that GetBy of 100
// random emails finds their documents.
func checkEntries(ctx context.Context, b driver.Backend, s *etagstore.Store[User], n int) string {
	space := b.Abilities().Entries
	scope, err := space.Scope(userKey(0))
	if err != nil {
		log.Fatalf("reindex: %v", err)
	}
	seen := make([]bool, n)
	count := 0
	for it, err := range b.List(ctx, space.Key(scope, "u.email.")) {
		if err != nil {
			log.Fatalf("reindex: entries: %v", err)
		}
		var en struct{ Value, Doc string }
		if err := json.Unmarshal(it.Data, &en); err != nil {
			log.Fatalf("reindex: entry %q: %v", it.Key, err)
		}
		k, ok := userIndex(en.Doc)
		if !ok || k >= n || seen[k] || en.Value != userOf(k).Email {
			log.Fatalf("reindex: entry %q names %q (%q)", it.Key, en.Doc, en.Value)
		}
		seen[k] = true
		count++
	}
	if count != n {
		log.Fatalf("reindex: %d entries for %d documents", count, n)
	}
	for range 100 {
		k := rand.IntN(n)
		doc, err := s.GetBy(ctx, byEmail, userOf(k).Email)
		if err != nil || doc.Key != userKey(k) {
			log.Fatalf("reindex: GetBy %q: %q, %v", userOf(k).Email, doc.Key, err)
		}
	}
	return fmt.Sprintf("exact (%d entries)", count)
}

// printReindex prints the reindex rows of backend.
func printReindex(backend string, rows []indexRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("## %s: reindex\n\n| scenario | pass | docs/s | × raw | seconds | requests | batches | batch s | queries | query s | point reads | peak heap MB | heap at start MB | check |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", backend)
	raw := 0.0
	for _, r := range rows {
		if strings.HasPrefix(r.op, "raw") {
			raw = float64(r.ops) / r.seconds
		}
	}
	for _, r := range rows {
		dps := float64(r.ops) / r.seconds
		ratio := "—"
		if raw > 0 && !strings.HasPrefix(r.op, "raw") {
			ratio = fmt.Sprintf("%.2f", dps/raw)
		}
		fmt.Printf("| %s | %s | %.0f | %s | %.2f | %d | %d | %.2f | %d | %.2f | %d | %.1f | %.1f | %s |\n", r.scenario, r.op, dps, ratio, r.seconds,
			r.requests, r.batches, r.batchTime.Seconds(), r.queries, r.queryTime.Seconds(), r.pointReads,
			float64(r.heapPeak)/(1<<20), float64(r.heapBase)/(1<<20), r.check)
	}
	fmt.Println()
}
