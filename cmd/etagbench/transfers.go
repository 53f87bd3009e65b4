package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// The transfers scenario: writers goroutines each move 1 unit at a time
// from one account to another, chosen at random among transferAccounts
// accounts of one partition, for the cell's duration. Modes:
//
//   - naive: the loop a user writes today — Get both accounts through the
//     Store, submit one entity group transaction replacing both with the
//     ETags read (tablestore.NewBatch; on memory, the backend's atomic
//     Commit with If-Match), and on 412 start again at once;
//   - library: Store.Transact (reads through tx, one atomic commit,
//     conflicts retried with the Store's backoff).
//
// Every cell ends with the total of the accounts checked (conserved) and
// each account checked against the transfers that reported success
// (exactly once); the run fails otherwise. Blob storage has no
// multi-document transaction: the scenario runs on memory and tables.

// transferAccounts is how many accounts a transfers cell moves units among.
const transferAccounts = 8

// openingBalance is every account's balance when a cell starts.
const openingBalance = 1000

// naiveTransfer is one attempt of the hand-written transfer of one unit
// from one account of a cell to another, reporting whether it committed
// (false on 412).
type naiveTransfer func(ctx context.Context, from, to string) (bool, error)

// tableTransfer is the naive transfer on tables: two Gets and a
// tablestore.Batch of two Replaces with the ETags read.
func tableTransfer(s *etagstore.Store[Counter]) naiveTransfer {
	return func(ctx context.Context, from, to string) (bool, error) {
		f, err := s.Get(ctx, from)
		if err != nil {
			return false, err
		}
		t, err := s.Get(ctx, to)
		if err != nil {
			return false, err
		}
		f.Value.N--
		t.Value.N++
		_, err = tablestore.NewBatch(s).Replace(f).Replace(t).Submit(ctx)
		return conflictOK(err)
	}
}

// memoryTransfer is the naive transfer on memstore, straight on the
// backend as the memory rows' naive loop is: two reads and one atomic
// Commit of two If-Match writes.
func memoryTransfer(mem *memstore.Backend, space string) naiveTransfer {
	commit := mem.Abilities().Commit
	return func(ctx context.Context, from, to string) (bool, error) {
		keys := []string{space + "/" + from, space + "/" + to}
		actions := make([]driver.Action, len(keys))
		for i, key := range keys {
			it, err := mem.Read(ctx, key)
			if err != nil {
				return false, err
			}
			var c Counter
			if err := json.Unmarshal(it.Data, &c); err != nil {
				return false, err
			}
			c.N += int64(2*i - 1) // the first gives, the second receives
			data, _ := json.Marshal(c)
			actions[i] = driver.Action{Key: key, Write: driver.Write{Data: data, Cond: driver.IfMatch(it.ETag)}}
		}
		_, err := commit(ctx, actions)
		return conflictOK(err)
	}
}

// transfer is the library's transfer: one Store.Transact. tries counts the
// runs of its function.
func transfer(ctx context.Context, s *etagstore.Store[Counter], from, to string, tries *int) error {
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[Counter]) error {
		*tries++
		f, err := tx.Get(from)
		if err != nil {
			return err
		}
		t, err := tx.Get(to)
		if err != nil {
			return err
		}
		f.N--
		t.N++
		return errors.Join(tx.Put(from, f), tx.Put(to, t))
	})
	return err
}

func account(i int) string { return fmt.Sprintf("acct-%d", i) }

// transferRows runs the transfers scenario once per writer count, and
// once in 4 processes of 4 writers (not on memory, which processes do not
// share), naive then library, on backends with transactions.
func transferRows(ctx context.Context, e *env, backend string, writers []int, d time.Duration) []row {
	if e.transfer == nil {
		return nil
	}
	var rows []row
	for _, w := range append(slices.Clone(writers), -4) { // -4: 4 processes × 4 writers
		name := fmt.Sprintf("transfers, %d writers, %d accounts", w, transferAccounts)
		if w < 0 {
			name = fmt.Sprintf("transfers, %d processes × 4 writers, %d accounts", -w, transferAccounts)
		}
		if !strings.Contains(name, only) || w < 0 && backend == "memory" {
			continue
		}
		for _, mode := range []string{"naive", "library"} {
			space := fmt.Sprintf("t%d%s", w, mode)
			s := seedAccounts(ctx, e, mode, space)
			var r result
			if w < 0 {
				r = multiProcess(e.conn, backend+"/transfers-"+mode+"/"+space+"/"+e.resource, -w, d)
			} else {
				r = transferCell(ctx, e, mode, space, w, d)
			}
			checkBalances(ctx, s, e.name+" transfers "+mode+" "+space, r.Moved)
			rows = append(rows, row{name, mode, r})
			fmt.Fprintf(os.Stderr, "%s / %s / %s: %.0f commits/s\n", backend, name, mode, float64(r.Commits)/r.Seconds)
		}
	}
	return rows
}

// seedAccounts gives the accounts of space their opening balance.
func seedAccounts(ctx context.Context, e *env, mode, space string) *etagstore.Store[Counter] {
	s := e.store(space, mode)
	for i := range transferAccounts {
		if _, err := s.Upsert(ctx, account(i), Counter{N: openingBalance, Note: "etagbench account"}); err != nil {
			log.Fatal(err)
		}
	}
	return s
}

// transferCell runs writers goroutines transferring among the accounts of
// space for d with one mode. Its result's Moved is the net units in, by
// account, of the transfers that reported success, for checkBalances.
func transferCell(ctx context.Context, e *env, mode, space string, writers int, d time.Duration) result {
	s := e.store(space, mode)
	var naive naiveTransfer
	if mode == "naive" {
		naive = e.transfer(s, space)
	}
	var mu sync.Mutex
	var res result
	moved := make([]int64, transferAccounts)
	before, landed := e.requests.n.Load(), e.requests.landed.Load()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			var attempts []int
			var lat []float64
			var net [transferAccounts]int64
			for time.Now().Before(deadline) {
				from := rand.IntN(transferAccounts)
				to := (from + 1 + rand.IntN(transferAccounts-1)) % transferAccounts
				t0 := time.Now()
				tries := 0
				var err error
				if naive != nil {
					for ok := false; !ok && err == nil; {
						tries++
						ok, err = naive(ctx, account(from), account(to))
					}
				} else {
					err = transfer(ctx, s, account(from), account(to), &tries)
				}
				if err != nil {
					log.Fatalf("%s transfers %s: %v", e.name, mode, err)
				}
				net[from]--
				net[to]++
				attempts = append(attempts, tries)
				lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
			}
			mu.Lock()
			defer mu.Unlock()
			res.add(attempts, lat)
			for i, n := range net {
				moved[i] += n
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Requests = e.requests.n.Load() - before
	// Writes are the entity group transactions that landed (batchLanded:
	// a batch is answered 202 whether or not its change set committed),
	// so commits/write is transfers per commit: every transfer writes two
	// accounts, and commits in one.
	res.Writes = e.requests.landed.Load() - landed
	res.Moved = moved
	return res
}

// checkBalances ends the run unless the accounts hold the opening balance
// moved by exactly the transfers that succeeded, and their total is
// conserved.
func checkBalances(ctx context.Context, s *etagstore.Store[Counter], cell string, moved []int64) {
	var total int64
	var got []int64
	for i := range transferAccounts {
		doc, err := s.Get(ctx, account(i))
		if err != nil {
			log.Fatalf("%s: %v", cell, err)
		}
		total += doc.Value.N
		got = append(got, doc.Value.N-openingBalance)
	}
	if total != transferAccounts*openingBalance {
		log.Fatalf("%s: the accounts total %d, want %d (conserved)", cell, total, transferAccounts*openingBalance)
	}
	if !slices.Equal(got, moved) {
		log.Fatalf("%s: the accounts moved by %v, the transfers that succeeded by %v", cell, got, moved)
	}
}
