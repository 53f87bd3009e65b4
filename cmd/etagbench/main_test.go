package main

import (
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/internal/smoke"
)

// docs/performance.md's etagbench command, short: every backend, one process and
// several, with and without added latency, and transfers where there are
// transactions. It must end, and every cell it prints must end with its
// counter exact (transfers: every account moved by exactly the transfers
// that succeeded, the total conserved).
func TestMainSmoke(t *testing.T) {
	azuritetest.ConnectionString(t) // fails in CI, never skips, without Azurite
	bin := smoke.Build(t)
	out, errOut := run(t, 3*time.Minute, bin, "-d", "100ms", "-writers", "4", "-only", "4", "-rtt", "0,2ms", "-locks=false")
	rows, transfers, spread := 0, 0, 0
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "| hot key"):
			rows++
		case strings.HasPrefix(line, "| transfers, 4 writers"):
			transfers++
		case strings.HasPrefix(line, "| transfers, 4 processes"):
			spread++
		default:
			continue
		}
		if !strings.Contains(line, "exact (") {
			t.Errorf("a cell whose counter is not exact: %s", line)
		}
	}
	// memory, table and blob at rtt 0; table and blob at 2ms: each with 4
	// writers and 4 processes × 4 writers, 4 to 5 modes each.
	if rows < 5*4*2 {
		t.Errorf("%d result rows, want at least %d", rows, 5*4*2)
	}
	// Transfers among 8 accounts by 4 writers, naive and library: memory and
	// table at rtt 0, table at 2ms (blobs have no transactions).
	if transfers != 3*2 {
		t.Errorf("%d transfers rows, want %d", transfers, 3*2)
	}
	// And in 4 processes × 4 writers: table at rtt 0 and 2ms (memory is
	// not shared between processes).
	if spread != 2*2 {
		t.Errorf("%d transfers rows of 4 processes, want %d", spread, 2*2)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}

// The YCSB workload F scenario, short, on memory and tables: each mode's
// cell must end with the counters summing exactly to the increments that
// succeeded (etagbench exits non-zero otherwise).
func TestYCSBSmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	out, errOut := run(t, 3*time.Minute, bin, "-backends", "memory,table", "-d", "100ms", "-only", "YCSB", "-locks=false")
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| YCSB-F") {
			rows++
		}
	}
	if rows != 2*3 { // memory and table, three modes each
		t.Errorf("%d YCSB rows, want 6\nstdout:\n%s\nstderr:\n%s", rows, smoke.Indent(out), smoke.Indent(errOut))
	}
}

// docs/performance.md's command for the hot key across 2, 3 and 4
// processes (-procs), short, on tables at 2 ms: a row per process count
// and mode, every counter exact.
func TestProcsSmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	out, errOut := run(t, 3*time.Minute, bin, "-backends", "table", "-d", "100ms", "-only", "hot key", "-writers", "1", "-procs", "2,3", "-rtt", "2ms", "-locks=false")
	rows := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		for _, p := range []string{"2", "3"} {
			if strings.HasPrefix(line, "| hot key, "+p+" processes × 4 writers") {
				rows[p]++
				if !strings.Contains(line, "exact (") {
					t.Errorf("a cell whose counter is not exact: %s", line)
				}
			}
		}
	}
	if rows["2"] != 4 || rows["3"] != 4 { // naive, library, library-nocache, library-nogroup
		t.Errorf("rows of 2 and 3 processes: %v, want 4 each\nstdout:\n%s\nstderr:\n%s", rows, smoke.Indent(out), smoke.Indent(errOut))
	}
}

// main.go's kanban command (-backends table -rtt 10ms -only kanban), short: on memory (transact and envelope) and
// on tables at rtt 0 and 2 ms (naive too), 4 writers. etagbench exits
// non-zero when a cell breaks the kanban invariants (the board's count,
// one claim per card's title, no claim without its card, the creates that
// succeeded equal the cards); each row must also show that creates
// succeeded and that some were refused as "title taken".
func TestKanbanSmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	out, errOut := run(t, 2*time.Minute, bin, "-backends", "memory,table", "-rtt", "0,2ms", "-d", "300ms", "-only", "kanban", "-kanbanwriters", "4")
	rows := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| kanban, 4 writers") {
			continue
		}
		cols := strings.Split(line, " | ")
		if len(cols) != 14 {
			t.Errorf("a kanban row of %d columns, want 14: %s", len(cols), line)
			continue
		}
		rows[cols[1]]++
		var cards int
		if _, err := fmt.Sscanf(cols[13], "exact (%d cards)", &cards); err != nil || cards == 0 || cols[4] == "0.0%" {
			t.Errorf("a kanban row without cards, titles taken or its invariants: %s", line)
		}
	}
	// memory, table at rtt 0 and 2 ms; naive on tables alone (indexed: a
	// Unique title index instead of claims).
	if want := map[string]int{"transact": 3, "transact-read": 3, "envelope": 3, "indexed": 3, "naive": 2}; !maps.Equal(rows, want) {
		t.Errorf("kanban rows by variant: %v, want %v", rows, want)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}

// run is smoke.Run of etagbench with the race detector's sleep at exit
// (GORACE atexit_sleep_ms, 1000 by default) off, in etagbench and in the
// worker processes it starts: otherwise every cell of several processes
// waits a second for its workers to exit. A race still fails the program
// (exit status 66) and its test.
func run(t *testing.T, timeout time.Duration, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return smoke.Run(t, timeout, bin, args...)
}

// main.go's getby command (-backends table -rtt 10ms -only getby), short:
// 100 documents, 4 readers, on memory and on tables at rtt 0 and 2 ms.
// etagbench exits non-zero when a read returns the wrong document (or
// ListBy the wrong team); each row must show its reads checked, and on
// tables a Get of 1 request, a GetBy of at most 2 (the entry, then the
// document) and a ListBy of one query and at most 20 document reads
// (concurrent ListBys of one team share reads).
func TestGetBySmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	out, errOut := run(t, 2*time.Minute, bin, "-backends", "memory,table", "-rtt", "0,2ms", "-d", "200ms", "-only", "getby", "-getbydocs", "100", "-getbyreaders", "4")
	rows := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| getby, 4 readers, 100 documents") {
			continue
		}
		cols := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cols) != 8 {
			t.Errorf("a getby row of %d columns, want 8: %s", len(cols), line)
			continue
		}
		op := strings.Fields(cols[1])[0]
		rows[op]++
		if !strings.HasPrefix(cols[7], "exact (") || strings.HasPrefix(cols[7], "exact (0 ") {
			t.Errorf("a getby row without reads checked: %s", line)
		}
		if cols[6] == "—" {
			continue // memory: no requests
		}
		rpr, err := strconv.ParseFloat(cols[6], 64)
		// Concurrent reads of one key may share a request (the Store's
		// read batching), so a read can cost less than its own request;
		// the lower bounds only catch counting that stopped working.
		if lo, hi := map[string]float64{"Get": 0.5, "GetBy": 1, "ListBy": 1}[op], map[string]float64{"Get": 1, "GetBy": 2, "ListBy": 21}[op]; err != nil || rpr < lo || rpr > hi {
			t.Errorf("%s: %s requests a read, want %.1f to %.0f: %s", op, cols[6], lo, hi, line)
		}
	}
	// memory, table at rtt 0 and 2 ms.
	if want := map[string]int{"Get": 3, "GetBy": 3, "ListBy": 3}; !maps.Equal(rows, want) {
		t.Errorf("getby rows by operation: %v, want %v", rows, want)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}

// main.go's reindex commands (-backends table -only reindex, at rtt 0
// and 10 ms), short: 300 documents at rtt 0 and 2 ms, in one table and
// with a table each (-reindexowntables). etagbench exits non-zero when a
// pass leaves a document without its claim or entry, or one more; each
// row must show its check, and both Reindex passes the batches of the
// raw loop's (3 of 100 entries).
func TestReindexSmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"OneTable", nil},
		{"TableEach", []string{"-reindexowntables"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-backends", "table", "-rtt", "0,2ms", "-only", "reindex", "-reindexdocs", "300"}, tc.args...)
			out, errOut := run(t, 2*time.Minute, bin, args...)
			rows := map[string]int{}
			for _, line := range strings.Split(out, "\n") {
				if !strings.HasPrefix(line, "| reindex, 300 documents") {
					continue
				}
				cols := strings.Split(strings.Trim(line, "| "), " | ")
				if len(cols) != 14 {
					t.Errorf("a reindex row of %d columns, want 14: %s", len(cols), line)
					continue
				}
				rows[strings.Fields(cols[1])[0]]++
				if !strings.HasPrefix(cols[13], "exact (300 ") {
					t.Errorf("a reindex row without its check: %s", line)
				}
			}
			// raw, Reindex and Reindex again, at rtt 0 and 2 ms.
			if want := map[string]int{"raw": 2, "Reindex": 4}; !maps.Equal(rows, want) {
				t.Errorf("reindex rows by pass: %v, want %v", rows, want)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
			}
		})
	}
}

// main.go's outbox command (-backends table -rtt 0,10ms -only outbox),
// short: at rtt 0 and 2 ms, 1 and 4 writers, 100 events relayed, 25
// commits a second relayed with a Poll of 25 ms, InFlight 1 and 4. etagbench exits
// non-zero when a cell loses, repeats or reorders an event (the commit
// cells: Read yields Seq 1…n, one per order; the relay and latency
// cells: publish meets Seq 1…n in order, the queue holds each ID once,
// Read yields them all). Each row must show its check; a lone
// transaction must cost one request with Emit as without (the issue's
// target: Emit adds none), and a relayed event one queue request and a
// few hundredths of a storage request.
func TestOutboxSmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	out, errOut := run(t, 3*time.Minute, bin, "-backends", "table", "-rtt", "0,2ms", "-d", "200ms", "-only", "outbox",
		"-outboxwriters", "1,4", "-outboxevents", "100", "-outboxrate", "25", "-outboxpoll", "25ms", "-outboxinflight", "1,4")
	rows := map[string]int{}
	lone := map[string]string{} // transaction → requests/commit, 1 writer
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| outbox ") {
			continue
		}
		cols := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(cols[len(cols)-1], "exact (") || strings.HasPrefix(cols[len(cols)-1], "exact (0 ") {
			t.Errorf("an outbox row without its check: %s", line)
		}
		kind := strings.TrimSuffix(strings.Fields(cols[0])[1], ",")
		rows[kind]++
		switch {
		case kind == "commit" && len(cols) != 10, kind == "relay" && len(cols) != 11, kind == "latency" && len(cols) != 14:
			t.Errorf("an outbox %s row of %d columns: %s", kind, len(cols), line)
		case kind == "commit" && cols[0] == "outbox commit, 1 writers":
			lone[cols[1]] += cols[3] + " "
		case kind == "relay":
			storage, err := strconv.ParseFloat(cols[5], 64)
			if err != nil || storage <= 0 || storage > 0.2 {
				t.Errorf("relay: %s storage requests an event, want at most 0.2: %s", cols[5], line)
			}
			switch queue, err := strconv.ParseFloat(cols[9], 64); {
			case strings.HasPrefix(cols[1], "none") && cols[9] != "0.00":
				t.Errorf("relay: %s queue requests an event, want 0.00: %s", cols[9], line)
			case strings.Contains(cols[1], "batches") && (err != nil || queue <= 0 || queue > 0.1):
				t.Errorf("relay: %s queue requests an event in batches of 32, want a few hundredths: %s", cols[9], line)
			case !strings.HasPrefix(cols[1], "none") && !strings.Contains(cols[1], "batches") && cols[9] != "1.00":
				t.Errorf("relay: %s queue requests an event, want 1.00: %s", cols[9], line)
			}
		}
	}
	// commit: 1 and 4 writers, without and with Emit; relay: azqueue
	// (InFlight 1 and 16, and batches of 32) and none, and at 2 ms the
	// queue without the proxy; latency: one rate and Poll, InFlight 1 and 4; each at rtt 0
	// and 2 ms.
	if want := map[string]int{"commit": 8, "relay": 9, "latency": 4}; !maps.Equal(rows, want) {
		t.Errorf("outbox rows by table: %v, want %v", rows, want)
	}
	if want := map[string]string{"order": "1.00 1.00 ", "order + Emit": "1.00 1.00 "}; !maps.Equal(lone, want) {
		t.Errorf("requests per lone transaction at rtt 0 and 2 ms: %v, want %v", lone, want)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}

// main.go's sweep command (-backends table -rtt 0 -only sweep), short:
// 2,000 documents in 4 partitions, 20 of them expired. etagbench exits
// non-zero when a loop leaves an expired document, loses a live one, or
// (the library) leaves the expiry entries other than one per live
// document; each row must show its check, the raw loop one DeleteEntity
// per expired document, and Sweep one entity group transaction per
// expired document, one query of the due entries and one ReadMany query
// per partition; Sweep again, with nothing due, that one query alone.
func TestSweepSmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	out, errOut := run(t, 2*time.Minute, bin, "-backends", "table", "-rtt", "0", "-only", "sweep", "-sweepdocs", "2000", "-sweepparts", "4")
	rows := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| sweep, 2000 documents in 4 partitions") {
			continue
		}
		cols := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cols) != 14 {
			t.Errorf("a sweep row of %d columns, want 14: %s", len(cols), line)
			continue
		}
		loop := cols[1]
		rows[loop]++
		var requests, scans, queries, reads, deletes, batches, deleted int
		var f float64
		_, err := fmt.Sscanf(strings.Join([]string{cols[4], cols[6], cols[7], cols[8], cols[9], cols[10], cols[12]}, " "),
			"%d %d (%f s) %d (%f s) %d %d (%f s) %d (%f s) %d", &requests, &scans, &f, &queries, &f, &reads, &deletes, &f, &batches, &f, &deleted)
		if err != nil {
			t.Errorf("a sweep row that does not parse (%v): %s", err, line)
			continue
		}
		if !strings.HasPrefix(cols[13], "exact (1980 live, ") {
			t.Errorf("a sweep row without its check: %s", line)
		}
		got := [6]int{scans, queries, reads, deletes, batches, deleted}
		want := map[string][6]int{
			"raw (list every entity, DeleteEntity If-Match)": {2, 0, 0, 20, 0, 20},
			"Store.Sweep":                     {1, 4, 0, 0, 20, 20},
			"Store.Sweep again (nothing due)": {1, 0, 0, 0, 0, 0},
		}[loop]
		if got != want {
			t.Errorf("%s: table-wide pages, partition queries, point reads, deletes, batches, deleted %v, want %v: %s", loop, got, want, line)
		}
	}
	if want := map[string]int{"raw (list every entity, DeleteEntity If-Match)": 1, "Store.Sweep": 1, "Store.Sweep again (nothing due)": 1}; !maps.Equal(rows, want) {
		t.Errorf("sweep rows by loop: %v, want %v", rows, want)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}

// main.go's sweeplag command (-backends table -rtt 0 -only sweeplag),
// short: 600 expirations a minute for a minute, SweepEvery(10s), under a
// clock 60 times as fast as the real one. The row must parse, with every
// document deleted and the table empty at the end, and lags no shorter
// than the skew (5 s: Sweep deletes nothing sooner).
func TestSweepLagSmoke(t *testing.T) {
	azuritetest.ConnectionString(t)
	bin := smoke.Build(t)
	out, errOut := run(t, 2*time.Minute, bin, "-backends", "table", "-rtt", "0", "-only", "sweeplag", "-sweepscale", "60", "-sweeprate", "600",
		"-sweepfor", "1m", "-sweepperiod", "10s", "-sweepttl", "10s", "-sweepparts", "4")
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| sweeplag, 600 expirations a minute, SweepEvery(10s), clock × 60") {
			continue
		}
		rows++
		cols := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cols) != 13 {
			t.Errorf("a sweeplag row of %d columns, want 13: %s", len(cols), line)
			continue
		}
		var created, passes int
		var p50, p99, worst, within float64
		_, err := fmt.Sscanf(strings.Join([]string{cols[1], cols[3], cols[5], cols[6], cols[7], cols[8]}, " "), "%d %d %f %f %f %f%%", &created, &passes, &p50, &p99, &worst, &within)
		switch {
		case err != nil:
			t.Errorf("a sweeplag row that does not parse (%v): %s", err, line)
		case created != 600 || cols[12] != "exact (600 created, 600 deleted, table empty)":
			t.Errorf("a sweeplag row without every document created and deleted: %s", line)
		case passes < 2 || p50 < 5 || p99 < p50 || worst < p99 || within < 0 || within > 100:
			t.Errorf("a sweeplag row with passes or lags out of order: %s", line)
		}
	}
	if rows != 1 {
		t.Errorf("%d sweeplag rows, want 1", rows)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}
