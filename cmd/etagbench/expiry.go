package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/tablestore"
)

// The expiry scenarios (this file): the targets of documents that expire
// (docs/expiry.md), on tables only, and only when -only names them (each
// writes tens of thousands of documents into tables of its own, which it
// deletes at the end).
//
// sweep (-only sweep): -sweepdocs documents (100,000) in -sweepparts
// partitions (100) of a fresh table, each with an expiry; 1% (every
// hundredth of each partition's) have expired by the sweeping Store's
// clock, which runs two hours ahead of the real one (Options.Clock), the
// rest expire in two days. The library's table is seeded through a
// Store with the Expiry index (Create, 32 at a time: each document with
// its expiry entry); the raw loop's table, with the same documents, by
// aztables entity group transactions of 100 inserts. raw is the purger
// a user writes with aztables: ListEntities of the whole table, 1,000 a
// page, decoding each entity's Expires, and DeleteEntity with If-Match
// on the ETag of each expired one, one after the other. Sweep is
// Store.Sweep once (a pass that a failed request ends is followed by
// another, and the row says so); Sweep again is a second pass with
// nothing due. Columns: seconds and requests, each with its ratio to
// raw's; among the requests the query pages that name no partition
// (table-wide: raw's listing, Sweep's range of due expiry entries), the
// queries of one partition (Sweep's ReadMany of the documents the
// entries name, up to 14 a query), point reads, DeleteEntity requests
// and entity group transactions (Sweep deletes each document with its
// entry in one), each kind with the time its requests took, summed; the
// bytes of the answers, and the documents deleted. Each loop is then
// checked by listing its table raw: every expired document gone, every
// live one there; in the library's table exactly one expiry entry per
// live document, naming it and its instant, and no other record.
//
// sweeplag (-only sweeplag): Store.SweepEvery(-sweepperiod, 1 minute)
// under a clock that runs -sweepscale times as fast as the real one (its
// Sleep sleeps 1/scale as long; 1, real time, by default: Azurite
// sweeps a few hundred documents a second, so at 10,000 a minute a
// faster clock measures Azurite), while 32 goroutines create documents
// at -sweeprate (10,000) a minute of that clock for -sweepfor (5
// minutes), each expiring -sweepttl (30 s) after its create, over
// -sweepparts partitions. The sweeper is a Store of its own on a client
// of its own (as in another process), wrapped to record, by the clock,
// when each document's delete commits; a document's lag is that instant
// less its expiry (ExpirySkew, 5 s, included). The cell ends when every
// document is deleted, or when none was for two periods after the last
// was due. Columns: documents created and their rate a minute (by the
// clock), passes, the longest pass (by the clock, from the pass log
// lines, which stderr lists), p50, p99 and max lag, the share deleted
// within 2 minutes (target: 99% at 10,000 a minute with SweepEvery(1
// min)), requests, the sweeper's by kind with the time they took,
// summed, real seconds, and the check: every document deleted, the
// table empty at the end (no entry left).

var (
	sweepDocs   = flag.Int("sweepdocs", 100000, "documents of the sweep scenario, 1% of them expired (table only; run when -only names it)")
	sweepParts  = flag.Int("sweepparts", 100, "partitions of the sweep and sweeplag scenarios' documents")
	sweepPeriod = flag.Duration("sweepperiod", time.Minute, "SweepEvery's period in the sweeplag scenario, by its scaled clock")
	sweepScale  = flag.Float64("sweepscale", 1, "how many times faster than real time the sweeplag scenario's clock runs")
	sweepRate   = flag.Int("sweeprate", 10000, "documents created, and so expiring, a minute of the sweeplag scenario's clock")
	sweepFor    = flag.Duration("sweepfor", 5*time.Minute, "how long, by its clock, the sweeplag scenario's writers create documents")
	sweepTTL    = flag.Duration("sweepttl", 30*time.Second, "how long after its create each sweeplag document expires")
)

// Session is the expiry scenarios' document.
type Session struct {
	User    string
	Expires time.Time
	Data    string
}

var byExpiry = etagstore.Expiry(func(s Session) time.Time { return s.Expires })

// sessionKey is the key of the i-th document among parts partitions.
func sessionKey(i, parts int) string { return fmt.Sprintf("p%03d/s%07d", i%parts, i) }

// sessionIndex is the i of sessionKey(i, parts).
func sessionIndex(key string, parts int) (int, bool) {
	_, rk, _ := strings.Cut(key, "/")
	n, err := strconv.Atoi(strings.TrimPrefix(rk, "s"))
	return n, err == nil && sessionKey(n, parts) == key
}

// sweepExpired reports whether the i-th document of the sweep scenario
// has expired: every hundredth of each partition's.
func sweepExpired(i, parts int) bool { return (i/parts)%100 == 0 }

// sessionOf is the i-th document of the sweep scenario, expiring at at.
func sessionOf(i int, at time.Time) Session {
	return Session{User: fmt.Sprintf("user-%d@example.com", i), Expires: at, Data: fmt.Sprintf("session %07d ", i) + strings.Repeat("x", 80)}
}

// shifted is a clock d ahead of the real one.
type shifted time.Duration

func (c shifted) Now() time.Time { return time.Now().Add(time.Duration(c)) }

func (shifted) Sleep(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, d) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// scaled is a clock that runs k times as fast as the real one from base,
// its instant at the real instant origin.
type scaled struct {
	origin, base time.Time
	k            float64
}

func (c scaled) Now() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.origin)) * c.k))
}

func (c scaled) Sleep(ctx context.Context, d time.Duration) error {
	return sleepCtx(ctx, time.Duration(float64(d)/c.k))
}

// real is how long d of c's time takes in real time.
func (c scaled) real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.k) }

// freshTable creates a table named name on e's account, its requests
// counted with e's, and returns its client and a func that deletes it.
func freshTable(e *env, name string) (*aztables.Client, func()) {
	svc := serviceClient(e, e.requests)
	if _, err := svc.CreateTable(context.Background(), name, nil); err != nil {
		log.Fatalf("%s: create table %s: %v", e.name, name, err)
	}
	drop := func() {
		if _, err := svc.DeleteTable(context.Background(), name, nil); err != nil {
			log.Printf("%s: delete table %s: %v", e.name, name, err)
		}
	}
	tables.Lock()
	defer tables.Unlock()
	tables.drops[name] = drop
	return svc.NewClient(name), func() {
		tables.Lock()
		delete(tables.drops, name)
		tables.Unlock()
		drop()
	}
}

// tables are the tables freshTable created that are still there.
var tables = struct {
	sync.Mutex
	drops map[string]func()
}{drops: map[string]func(){}}

// fatalf is log.Fatalf once the tables freshTable created are deleted:
// the in-memory Azurite slows as data accumulates.
func fatalf(format string, args ...any) {
	tables.Lock()
	for _, drop := range tables.drops {
		drop()
	}
	tables.Unlock()
	log.Fatalf(format, args...)
}

// createSession is s.Create of key, sent again (up to 5 times in all) when it
// fails, as a request whose connection Azurite reset does: ErrExists then
// means an earlier send landed.
func createSession(ctx context.Context, s *etagstore.Store[Session], key string, v Session) error {
	for attempt := 1; ; attempt++ {
		_, err := s.Create(ctx, key, v)
		switch {
		case err == nil || attempt > 1 && errors.Is(err, etagstore.ErrExists):
			return nil
		case attempt == 5 || errors.Is(err, etagstore.ErrExists) || errors.Is(err, etagstore.ErrInvalidInput):
			return err
		}
		fmt.Fprintf(os.Stderr, "  Create %s: %v; again\n", key, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// serviceClient is a table service client of e's account whose requests
// c counts.
func serviceClient(e *env, c *counting) *aztables.ServiceClient {
	opts := azcore.ClientOptions{Transport: c, Retry: policy.RetryOptions{RetryDelay: 20 * time.Millisecond}}
	svc, err := aztables.NewServiceClientFromConnectionString(e.conn, &aztables.ClientOptions{ClientOptions: opts})
	if err != nil {
		log.Fatalf("%s: %v", e.name, err)
	}
	return svc
}

// eachOf calls f for each of n indexes, workers at a time.
func eachOf(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// passLog keeps the Store's sweep pass log lines (Options.Logger).
type passLog struct {
	mu     sync.Mutex
	passes []sweepPass
}

type sweepPass struct {
	swept, listed int64
	took, lag     time.Duration
	failed        string
}

func (l *passLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *passLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "etagstore: sweep pass") {
		return nil
	}
	var p sweepPass
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "swept":
			p.swept = a.Value.Int64()
		case "listed":
			p.listed = a.Value.Int64()
		case "took":
			p.took = a.Value.Duration()
		case "lag":
			p.lag = a.Value.Duration()
		case "error":
			p.failed = a.Value.String()
		}
		return true
	})
	if p.failed != "" {
		fmt.Fprintf(os.Stderr, "  sweep pass failed: %s\n", p.failed)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passes = append(l.passes, p)
	return nil
}

func (l *passLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *passLog) WithGroup(string) slog.Handler      { return l }

func (l *passLog) all() []sweepPass {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.passes)
}

// sweepRow is one row of the sweep table.
type sweepRow struct {
	scenario, loop                                         string
	seconds                                                float64
	requests, scans, queries, pointReads, deletes, batches int64
	// the time each kind took, summed
	scanTime, queryTime, deleteTime, batchTime time.Duration
	received                                   int64 // bytes of the answers
	deleted                                    int
	check                                      string
}

// counted runs loop, timing it and counting its requests into r.
func counted(e *env, r *sweepRow, loop func()) {
	c := e.requests
	n, sc, q, pr, d, b := c.n.Load(), c.scans.Load(), c.queries.Load(), c.pointReads.Load(), c.deletes.Load(), c.batches.Load()
	st, qt, dt, bt, rb := c.scanTime.Load(), c.queryTime.Load(), c.deleteTime.Load(), c.batchTime.Load(), c.received.Load()
	t0 := time.Now()
	loop()
	r.seconds = time.Since(t0).Seconds()
	r.requests, r.scans, r.queries = c.n.Load()-n, c.scans.Load()-sc, c.queries.Load()-q
	r.pointReads, r.deletes, r.batches = c.pointReads.Load()-pr, c.deletes.Load()-d, c.batches.Load()-b
	r.scanTime, r.queryTime = time.Duration(c.scanTime.Load()-st), time.Duration(c.queryTime.Load()-qt)
	r.deleteTime, r.batchTime = time.Duration(c.deleteTime.Load()-dt), time.Duration(c.batchTime.Load()-bt)
	r.received = c.received.Load() - rb
}

// sweepAhead is how far ahead of the real clock the sweep scenario's
// sweeping clock runs: past every expired document's instant (an hour
// and up to 100 s ahead of the seeding's start) and before every live
// one's (two days ahead).
const sweepAhead = 2 * time.Hour

// sweepRows runs the sweep scenario on tables, when -only names it.
func sweepRows(ctx context.Context, e *env) []sweepRow {
	n, parts := *sweepDocs, *sweepParts
	name := fmt.Sprintf("sweep, %d documents in %d partitions, 1%% expired", n, parts)
	if e.table == nil || only == "" || !strings.Contains(name, only) {
		return nil
	}
	if n < 100 || parts < 1 || parts > 1000 {
		log.Fatalf("-sweepdocs %d, -sweepparts %d: at least 100 documents, 1 to 1000 partitions", n, parts)
	}
	base := time.Now().UTC().Truncate(time.Millisecond)
	expires := func(i int) time.Time {
		if sweepExpired(i, parts) {
			return base.Add(time.Hour + time.Duration(i)*time.Millisecond)
		}
		return base.Add(48*time.Hour + time.Duration(i)*time.Millisecond)
	}
	expired := 0
	for i := range n {
		if sweepExpired(i, parts) {
			expired++
		}
	}
	stamp := time.Now().UnixNano() % 1e6
	libClient, dropLib := freshTable(e, fmt.Sprintf("sweeplib%d", stamp))
	defer dropLib()
	rawClient, dropRaw := freshTable(e, fmt.Sprintf("sweepraw%d", stamp))
	defer dropRaw()

	// The library's table, through a Store with the Expiry index.
	t0 := time.Now()
	seeder := etagstore.New(tablestore.New(libClient, nil), &etagstore.Options{Clock: shifted(0)}, byExpiry)
	eachOf(n, 32, func(i int) {
		if err := createSession(ctx, seeder, sessionKey(i, parts), sessionOf(i, expires(i))); err != nil {
			fatalf("%s sweep: seed: %v", e.name, err)
		}
	})
	libSeeded := time.Since(t0)
	// The raw loop's, by entity group transactions of 100 inserts.
	t0 = time.Now()
	var batches [][]int
	for p := range parts {
		var b []int
		for i := p; i < n; i += parts {
			if b = append(b, i); len(b) == tablestore.MaxBatchActions {
				batches, b = append(batches, b), nil
			}
		}
		if len(b) > 0 {
			batches = append(batches, b)
		}
	}
	eachOf(len(batches), 32, func(j int) {
		actions := make([]aztables.TransactionAction, len(batches[j]))
		for k, i := range batches[j] {
			pk, rk, _ := strings.Cut(sessionKey(i, parts), "/")
			s := sessionOf(i, expires(i))
			ent, _ := json.Marshal(map[string]string{"PartitionKey": pk, "RowKey": rk, "User": s.User, "Data": s.Data,
				"Expires": s.Expires.Format(time.RFC3339Nano), "Expires@odata.type": "Edm.DateTime"})
			actions[k] = aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: ent}
		}
		for attempt := 1; ; attempt++ {
			_, err := rawClient.SubmitTransaction(ctx, actions, nil)
			if err == nil || attempt > 1 && strings.Contains(err.Error(), "EntityAlreadyExists") {
				break // an earlier send landed: a batch lands whole
			}
			if attempt == 5 {
				fatalf("%s sweep: seed raw: %v", e.name, err)
			}
			fmt.Fprintf(os.Stderr, "  raw seed batch: %v; again\n", err)
			time.Sleep(100 * time.Millisecond)
		}
	})
	fmt.Fprintf(os.Stderr, "%s / %s: seeded the library's table (Store.Create, 32 at a time) in %.1f s, the raw loop's (batches of 100, 32 at a time) in %.1f s\n",
		e.name, name, libSeeded.Seconds(), time.Since(t0).Seconds())

	now := time.Now().Add(sweepAhead) // the raw loop's clock, the Store's
	raw := sweepRow{scenario: name, loop: "raw (list every entity, DeleteEntity If-Match)"}
	counted(e, &raw, func() {
		var err error
		if raw.deleted, err = rawPurge(ctx, rawClient, now); err != nil {
			fatalf("%s sweep: raw: %v", e.name, err)
		}
	})
	raw.check = checkSwept(ctx, rawClient, n, parts, expires, false)
	fmt.Fprintf(os.Stderr, "%s / %s / raw: %.1f s, %d requests\n", e.name, name, raw.seconds, raw.requests)

	passes := &passLog{}
	s := etagstore.New(tablestore.New(libClient, nil), &etagstore.Options{Clock: shifted(sweepAhead), Logger: slog.New(passes), RecordKeys: true}, byExpiry)
	rows := []sweepRow{raw}
	for _, loop := range []string{"Store.Sweep", "Store.Sweep again (nothing due)"} {
		// A failed request ends a pass (what it deleted stays deleted):
		// the loop then runs another, as SweepEvery would a period later,
		// and the row says so.
		r := sweepRow{scenario: name, loop: loop}
		var failed []string
		counted(e, &r, func() {
			for pass := 1; ; pass++ {
				n, err := s.Sweep(ctx)
				r.deleted += n
				if err == nil {
					break
				}
				if pass == 3 {
					fatalf("%s sweep: %v", e.name, err)
				}
				fmt.Fprintf(os.Stderr, "%s / %s / %s: pass %d ended after %d deleted: %v\n", e.name, name, loop, pass, n, err)
				failed = append(failed, fmt.Sprintf("pass %d ended by a failed request after %d deleted", pass, n))
			}
		})
		r.check = checkSwept(ctx, libClient, n, parts, expires, true)
		if len(failed) > 0 {
			r.check += fmt.Sprintf("; %d passes: %s", len(failed)+1, strings.Join(failed, ", "))
		}
		rows = append(rows, r)
		for _, p := range passes.all()[len(passes.all())-len(failed)-1:] {
			fmt.Fprintf(os.Stderr, "%s / %s / %s: pass: swept %d, listed %d, took %.2f s\n", e.name, name, loop, p.swept, p.listed, p.took.Seconds())
		}
		fmt.Fprintf(os.Stderr, "%s / %s / %s: %.1f s, %d requests\n", e.name, name, loop, r.seconds, r.requests)
	}
	if rows[1].deleted != expired || rows[2].deleted != 0 || raw.deleted != expired {
		fatalf("%s sweep: deleted %d (raw), %d and %d (Sweep, again), want %d, %d and 0", e.name, raw.deleted, rows[1].deleted, rows[2].deleted, expired, expired)
	}
	return rows
}

// rawPurge is the purger a user writes with aztables: list every entity
// of the table, 1,000 a page, and delete each one whose Expires has
// passed by now, with If-Match on its ETag, one after the other. It
// returns how many it deleted; an entity written since it was listed (a
// 412) is left alone.
func rawPurge(ctx context.Context, client *aztables.Client, now time.Time) (int, error) {
	top := int32(1000)
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: &top})
	deleted := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return deleted, err
		}
		for _, raw := range page.Entities {
			var ent struct {
				PartitionKey, RowKey string
				Expires              *time.Time
				ETag                 string `json:"odata.etag"`
			}
			if err := json.Unmarshal(raw, &ent); err != nil {
				return deleted, err
			}
			if ent.Expires == nil || now.Before(*ent.Expires) {
				continue
			}
			etag := azcore.ETag(ent.ETag)
			_, err := client.DeleteEntity(ctx, ent.PartitionKey, ent.RowKey, &aztables.DeleteEntityOptions{IfMatch: &etag})
			var re *azcore.ResponseError
			if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
				// The SDK sent it again after a lost answer, and the first
				// had deleted it (nothing else deletes here).
				fmt.Fprintf(os.Stderr, "  raw purger: %s/%s: 404 (a send whose answer was lost deleted it)\n", ent.PartitionKey, ent.RowKey)
				err = nil
			}
			if ok, err := conflictOK(err); err != nil {
				return deleted, err
			} else if ok {
				deleted++
			}
		}
	}
	return deleted, nil
}

// checkSwept lists the table raw and checks that exactly the documents
// that had not expired are there; with entries (the library's table),
// that each holds exactly its expiry entry and nothing else is there.
func checkSwept(ctx context.Context, client *aztables.Client, n, parts int, expires func(int) time.Time, entries bool) string {
	want := func(i int) bool { return !sweepExpired(i, parts) }
	docs, ents := make([]bool, n), make([]bool, n)
	nd, ne, live := 0, 0, 0
	for i := range n {
		if want(i) {
			live++
		}
	}
	pager := client.NewListEntitiesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			fatalf("sweep: check: %v", err)
		}
		for _, raw := range page.Entities {
			var ent struct {
				PartitionKey, RowKey, Doc, Index, Value string
			}
			if err := json.Unmarshal(raw, &ent); err != nil {
				fatalf("sweep: check: %v", err)
			}
			if rest, ok := strings.CutPrefix(ent.RowKey, "\uFFFFe.x."); ok && entries {
				i, ok := sessionIndex(ent.Doc, parts)
				if !ok || i >= n || !want(i) || ents[i] || ent.Value != fmt.Sprintf("%013d", expires(i).UnixMilli()) ||
					!strings.HasPrefix(rest, ent.Index+"."+ent.Value+".") || !strings.HasPrefix(ent.Doc, ent.PartitionKey+"/") {
					fatalf("sweep: check: entry %q (%+v): not one per live document", ent.RowKey, ent)
				}
				ents[i] = true
				ne++
				continue
			}
			i, ok := sessionIndex(ent.PartitionKey+"/"+ent.RowKey, parts)
			if !ok || i >= n || docs[i] {
				fatalf("sweep: check: an entity %s/%q that is no document of the scenario", ent.PartitionKey, ent.RowKey)
			}
			if !want(i) {
				fatalf("sweep: check: %s expired at %s and is still there", sessionKey(i, parts), expires(i))
			}
			docs[i] = true
			nd++
		}
	}
	switch {
	case nd != live:
		fatalf("sweep: check: %d live documents of %d left", nd, live)
	case entries && ne != live:
		fatalf("sweep: check: %d expiry entries for %d live documents", ne, live)
	case entries:
		return fmt.Sprintf("exact (%d live, %d entries, %d gone)", nd, ne, n-nd)
	}
	return fmt.Sprintf("exact (%d live, %d gone)", nd, n-nd)
}

// printSweep prints the sweep rows of backend.
func printSweep(backend string, rows []sweepRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("## %s: sweep\n\n| scenario | loop | seconds | × raw | requests | × raw | table-wide query pages | partition queries | point reads | deletes | batches | MB received | docs deleted | check |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", backend)
	var raw sweepRow
	for _, r := range rows {
		if strings.HasPrefix(r.loop, "raw") {
			raw = r
		}
	}
	for _, r := range rows {
		secs, reqs := "—", "—"
		if r.loop != raw.loop && raw.seconds > 0 && raw.requests > 0 {
			secs, reqs = fmt.Sprintf("%.3f", r.seconds/raw.seconds), fmt.Sprintf("%.3f", float64(r.requests)/float64(raw.requests))
		}
		fmt.Printf("| %s | %s | %.2f | %s | %d | %s | %d (%.2f s) | %d (%.2f s) | %d | %d (%.2f s) | %d (%.2f s) | %.2f | %d | %s |\n", r.scenario, r.loop, r.seconds, secs, r.requests, reqs,
			r.scans, r.scanTime.Seconds(), r.queries-r.scans, (r.queryTime - r.scanTime).Seconds(), r.pointReads,
			r.deletes, r.deleteTime.Seconds(), r.batches, r.batchTime.Seconds(), float64(r.received)/1e6, r.deleted, r.check)
	}
	fmt.Println()
}

// deletions is a table Backend that records, by clock, when each
// document's delete commits (the sweeper's: a commit of the document's
// delete with its entries).
type deletions struct {
	*tablestore.Backend
	clock etagstore.Clock
	mu    sync.Mutex
	at    map[string]time.Time
}

func (d *deletions) Abilities() driver.Abilities {
	ab := d.Backend.Abilities()
	commit := ab.Commit
	ab.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		etags, err := commit(ctx, actions)
		if err == nil {
			now := d.clock.Now()
			d.mu.Lock()
			for _, a := range actions {
				if _, rk, _ := strings.Cut(a.Key, "/"); a.Delete && !strings.HasPrefix(rk, "\uFFFF") {
					d.at[a.Key] = now
				}
			}
			d.mu.Unlock()
		}
		return etags, err
	}
	return ab
}

func (d *deletions) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.at)
}

// lagRow is the row of the sweeplag table.
type lagRow struct {
	scenario               string
	created, deleted, left int
	perMinute              float64 // created a minute, by the scaled clock
	passes                 int
	longest                time.Duration // the longest pass, by the scaled clock
	p50, p99, worst        time.Duration
	within                 float64   // share deleted within 2 minutes of expiry
	requests               int64     // the writers' and the sweeper's
	sweeper                *counting // the sweeper's requests
	seconds                float64   // real
	check                  string
}

// lagRows runs the sweeplag scenario on tables, when -only names it.
func lagRows(ctx context.Context, e *env) []lagRow {
	rate, period, k, parts := *sweepRate, *sweepPeriod, *sweepScale, *sweepParts
	name := fmt.Sprintf("sweeplag, %d expirations a minute, SweepEvery(%s), clock × %g", rate, period, k)
	if e.table == nil || only == "" || only == "sweep" || !strings.Contains(name, only) {
		return nil
	}
	if rate < 1 || k <= 0 || period < time.Millisecond || parts < 1 || parts > 1000 {
		log.Fatalf("-sweeprate %d, -sweepscale %g, -sweepperiod %s, -sweepparts %d: out of range", rate, k, period, parts)
	}
	total := int(float64(rate) * sweepFor.Minutes())
	table := fmt.Sprintf("sweeplag%d", time.Now().UnixNano()%1e6)
	client, drop := freshTable(e, table)
	defer drop()
	clock := scaled{origin: time.Now(), base: time.Now().UTC(), k: k}
	// The writers' Store, and the sweeper's, on a client of its own (as
	// in another process), its requests counted apart.
	s := etagstore.New(tablestore.New(client, nil), &etagstore.Options{Clock: clock}, byExpiry)
	sweeper := &counting{}
	b := &deletions{Backend: tablestore.New(serviceClient(e, sweeper).NewClient(table), nil), clock: clock, at: map[string]time.Time{}}
	passes := &passLog{}
	sw := etagstore.New(b, &etagstore.Options{Clock: clock, Logger: slog.New(passes), RecordKeys: true}, byExpiry) // RecordKeys: the log says why a pass failed
	before := e.requests.n.Load()
	start := time.Now()

	sctx, stop := context.WithCancel(ctx)
	swept := make(chan error, 1)
	go func() { swept <- sw.SweepEvery(sctx, period, nil) }()

	// The writers: document j is due at base + j/rate minutes, and expires
	// -sweepttl after its create (by the clock).
	expiry := make([]time.Time, total)
	every := time.Duration(float64(time.Minute) / float64(rate))
	var last atomic.Int64 // the clock's instant of the last create, ns since base
	eachOf(total, 32, func(j int) {
		due := clock.base.Add(time.Duration(j) * every)
		if wait := due.Sub(clock.Now()); wait > 0 {
			time.Sleep(clock.real(wait))
		}
		now := clock.Now()
		at := now.Add(*sweepTTL)
		if err := createSession(ctx, s, sessionKey(j, parts), sessionOf(j, at)); err != nil {
			fatalf("%s sweeplag: create: %v", e.name, err)
		}
		expiry[j] = at
		for {
			l := last.Load()
			if int64(now.Sub(clock.base)) <= l || last.CompareAndSwap(l, int64(now.Sub(clock.base))) {
				break
			}
		}
	})
	wrote := time.Duration(last.Load())
	fmt.Fprintf(os.Stderr, "%s / %s: created %d documents in %.1f simulated minutes (%.1f real s)\n", e.name, name, total, wrote.Minutes(), time.Since(start).Seconds())

	// Wait until every document is deleted, or until a period (and the
	// skew) after the last was due has passed without a delete.
	lastDue := slices.MaxFunc(expiry, func(a, b time.Time) int { return a.Compare(b) })
	seen, since := b.count(), clock.Now()
	for seen < total {
		time.Sleep(clock.real(period) / 20)
		if n := b.count(); n != seen {
			seen, since = n, clock.Now()
		}
		if now := clock.Now(); now.After(lastDue.Add(5*time.Second+2*period)) && now.Sub(since) > 2*period {
			break
		}
	}
	stop()
	if err := <-swept; err != nil {
		fatalf("%s sweeplag: SweepEvery: %v", e.name, err)
	}
	r := lagRow{scenario: name, created: total, perMinute: float64(total) / wrote.Minutes(), requests: e.requests.n.Load() - before + sweeper.n.Load(),
		seconds: time.Since(start).Seconds(), sweeper: sweeper}

	// Lags; a document never deleted counts as late.
	lags := make([]float64, 0, total)
	b.mu.Lock()
	for j := range total {
		if at, ok := b.at[sessionKey(j, parts)]; ok {
			lags = append(lags, at.Sub(expiry[j]).Seconds())
		} else {
			lags = append(lags, math.Inf(1))
		}
	}
	r.deleted = len(b.at)
	b.mu.Unlock()
	slices.Sort(lags)
	sec := func(f float64) time.Duration {
		if math.IsInf(f, 1) {
			return -1
		}
		return time.Duration(f * float64(time.Second))
	}
	r.p50, r.p99, r.worst = sec(pct(lags, 50)), sec(pct(lags, 99)), sec(lags[len(lags)-1])
	in := 0
	for _, l := range lags {
		if l <= 120 {
			in++
		}
	}
	r.within = float64(in) / float64(total)
	for _, p := range passes.all() {
		r.passes++
		r.longest = max(r.longest, p.took)
		fmt.Fprintf(os.Stderr, "  pass %d: swept %d, listed %d, took %.1f s, lag %.1f s (simulated)\n", r.passes, p.swept, p.listed, p.took.Seconds(), p.lag.Seconds())
	}

	// The check: the table holds nothing left (no document, no entry),
	// and every document was seen deleted.
	pager := client.NewListEntitiesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			fatalf("%s sweeplag: check: %v", e.name, err)
		}
		r.left += len(page.Entities)
	}
	r.check = fmt.Sprintf("exact (%d created, %d deleted, table empty)", r.created, r.deleted)
	if r.left > 0 || r.deleted != total {
		r.check = fmt.Sprintf("%d created, %d deleted, %d entities left", r.created, r.deleted, r.left)
	}
	fmt.Fprintf(os.Stderr, "%s / %s: %d passes; %s\n", e.name, name, r.passes, r.check)
	return []lagRow{r}
}

// printLag prints the sweeplag rows of backend.
func printLag(backend string, rows []lagRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("## %s: sweeplag\n\n| scenario | docs created | created/min | passes | longest pass s | p50 lag s | p99 lag s | max lag s | within 2 min | requests | the sweeper's | real seconds | check |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", backend)
	secs := func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return fmt.Sprintf("%.1f", d.Seconds())
	}
	for _, r := range rows {
		c := r.sweeper
		sweeper := fmt.Sprintf("%d: %d table-wide pages (%.1f s), %d partition queries (%.1f s), %d batches (%.1f s)", c.n.Load(),
			c.scans.Load(), time.Duration(c.scanTime.Load()).Seconds(), c.queries.Load()-c.scans.Load(), time.Duration(c.queryTime.Load()-c.scanTime.Load()).Seconds(),
			c.batches.Load(), time.Duration(c.batchTime.Load()).Seconds())
		fmt.Printf("| %s | %d | %.0f | %d | %s | %s | %s | %s | %.2f%% | %d | %s | %.1f | %s |\n", r.scenario, r.created, r.perMinute, r.passes,
			secs(r.longest), secs(r.p50), secs(r.p99), secs(r.worst), 100*r.within, r.requests, sweeper, r.seconds, r.check)
	}
	fmt.Println()
}
