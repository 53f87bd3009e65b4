package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/tablestore"
)

// The kanban scenario (memory and table; this file): -kanbanwriters
// goroutines (default 32) create cards on one board, one table partition,
// for the cell's duration. A create is one atomic set of three types: the
// Card, the Board's Count incremented by one, and a TitleClaim keyed by
// the SHA-256 of the lower-cased title (titles hold / # ?), which makes
// titles unique on the board. 30% of the creates draw a
// title already drawn (recently, in other letter case: it collides with a
// card made or a create in flight); a colliding create fails as "title
// taken" with nothing written. Variants, each on a partition of its own:
//
//   - transact: etagstore.Transact over three Stores (Store[Card],
//     Store[Board], Store[TitleClaim]) of one table and partition: create
//     the claim, create the card, Get the board and Put it with Count+1;
//   - transact-read: the same, reading the claim first as the hand-written
//     loop does (Get: found, title taken; missing, Put);
//   - envelope: Store.Transact of one Store over kanbanDoc, which holds
//     the three types' fields (omitempty), doing the same;
//   - indexed: etagstore.Transact over two Stores, the cards' with a
//     Unique title index (lower-cased) instead of claims: create the
//     card, Get the board and Put it with Count+1; a held title is a
//     *UniqueError. The claims the invariants check are the index's
//     entries, listed raw;
//   - naive (tables only): the aztables loop a user writes — GetEntity of
//     the claim (missing: free) and of the board, then one
//     SubmitTransaction: insert claim, insert card, replace board If-Match
//     its ETag; on a refusal of the board (412) start again at once; a
//     claim found, or an insert of it refused (409), is "title taken".
//
// Every cell ends with the invariants checked, the run failing otherwise:
// the board's Count equals the cards; each card's title has exactly one
// claim and it names the card; no claim without its card; the creates
// that succeeded equal the cards. main.go's doc comment shows the command.
//
// Columns: creates/s (that succeeded) and its ratio to naive's; taken,
// the share of creates tried that failed as title taken; requests/create,
// every HTTP request of the cell (reads, commits, retries, the taken
// creates' too) per create that succeeded; fn runs/op, runs of fn (naive:
// rounds of its loop) per create tried; p50 and p99 ms of a create that
// succeeded; commits sent, the entity group transactions (POST …/$batch)
// the counting transport saw, and landed, those answered with every
// inner response 2xx; creates/commit, creates that succeeded per commit
// landed; landed commits/s × RTT, 1.00 when a commit lands every round
// trip the -rtt proxies add (the board is one entity: its commits form a
// chain, one per round trip at best).

// kanbanWriters (-kanbanwriters) is how many goroutines create cards.
var kanbanWriters = flag.Int("kanbanwriters", 32, "goroutines of the kanban scenario")

// kanbanRecent is how many of the latest fresh titles a colliding create
// draws from.
const kanbanRecent = 64

// Card is a kanban card.
type Card struct {
	Title  string
	Column string
}

// Board is the one document per board, counting its cards.
type Board struct {
	Count int64
}

// TitleClaim holds a normalised title for the card that has it.
type TitleClaim struct {
	Card string // the card's key
}

// kanbanDoc is the envelope variant's one document type: each key holds
// one of the three.
type kanbanDoc struct {
	Card  *Card       `json:",omitempty"`
	Board *Board      `json:",omitempty"`
	Claim *TitleClaim `json:",omitempty"`
}

const boardKey = "board"

// claimKey is the key of the claim on title: the SHA-256 of its lower-cased
// form, in hex (a title may hold characters no key may).
func claimKey(title string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(title)))
	return "title-" + hex.EncodeToString(sum[:])
}

// errTitleTaken: another card of the board has the title.
var errTitleTaken = errors.New("title taken")

// create buffers the create of key in tx: Tx.Create reads nothing, and a
// key that exists fails the transaction with ErrExists.
func create[T any](tx *etagstore.Tx[T], key string, v T) error {
	return tx.Create(key, v)
}

// titles draws the titles of a cell: fresh ones, and 30% of the time
// (the 2nd, 5th and 8th draw of every 10, so that even a cell of a few
// creates, a short test's under load, has one) one of the latest
// kanbanRecent fresh ones in upper case, which normalises to the same
// claim. Each such draw makes one create fail as title taken: its own, or
// that of the fresh title's create when it came second.
type titles struct {
	mu     sync.Mutex
	draws  int
	fresh  int
	recent []string
}

func (p *titles) draw() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draws++
	if d := p.draws % 10; d == 2 || d == 5 || d == 8 {
		return strings.ToUpper(p.recent[rand.IntN(len(p.recent))])
	}
	p.fresh++
	t := fmt.Sprintf("Card #%d: fix /login?next=%%2F", p.fresh)
	if len(p.recent) < kanbanRecent {
		p.recent = append(p.recent, t)
	} else {
		p.recent[p.fresh%kanbanRecent] = t
	}
	return t
}

// kanbanCreate is one create of a variant: runs is how many times its
// function (naive: its loop) ran; a title taken is errTitleTaken.
type kanbanCreate func(ctx context.Context, card, title string) (runs int, err error)

// kanbanState is what a cell left on its board.
type kanbanState struct {
	count  int64
	cards  map[string]string // card key → title
	claims map[string]string // claim key → card key
}

// kanbanVariant is one variant on one board: its create, and the read of
// the board's state for the invariants.
type kanbanVariant struct {
	create kanbanCreate
	state  func(ctx context.Context) (kanbanState, error)
}

type kanbanResult struct {
	created, taken int64
	runs           int64
	latency        []float64 // ms, of each create that succeeded
	requests       int64
	batches        int64 // entity group transactions sent (POST $batch)
	landed         int64 // … of which every action was applied
	seconds        float64
}

// kanbanRows runs the kanban scenario on backends with transactions:
// transact, transact-read and envelope, and naive on tables.
func kanbanRows(ctx context.Context, e *env, backend string, d time.Duration) []kanbanRow {
	name := fmt.Sprintf("kanban, %d writers, 1 board", *kanbanWriters)
	if e.backend == nil || !strings.Contains(name, only) {
		return nil
	}
	variants := []string{"transact", "transact-read", "envelope", "indexed"}
	if e.table != nil {
		variants = append([]string{"naive"}, variants...)
	}
	var rows []kanbanRow
	for _, v := range variants {
		space := fmt.Sprintf("kanban%s%d", strings.ReplaceAll(v, "-", ""), time.Now().UnixNano()%1e6)
		e, drop := apart(e, space)
		kv := newKanbanVariant(ctx, e, v, space)
		r := kanbanCell(ctx, e, kv, *kanbanWriters, d)
		st, err := kv.state(ctx)
		if err != nil {
			log.Fatalf("%s kanban %s: reading the board: %v", backend, v, err)
		}
		if err := st.check(r.created); err != nil {
			log.Fatalf("%s kanban %s %s: %v", backend, v, space, err)
		}
		drop()
		rows = append(rows, kanbanRow{name, v, r, len(st.cards)})
		fmt.Fprintf(os.Stderr, "%s / %s / %s: %.0f creates/s, %d taken\n", backend, name, v, float64(r.created)/r.seconds, r.taken)
	}
	return rows
}

// apart is e with its table, on tables, a fresh one named name
// (freshTable), and the drop of that table: Azurite answers a request by
// walking the whole table (an insert's check, a query's filter), so on
// the shared table each variant would pay for the entities the variants
// before it left.
func apart(e *env, name string) (*env, func()) {
	if e.table == nil {
		return e, func() {}
	}
	c, drop := freshTable(e, name)
	a := *e
	a.table = c
	a.backend = func(space string) driver.Backend { return tablestore.New(c, &tablestore.Options{Partition: space}) }
	return &a, drop
}

type kanbanRow struct {
	scenario, variant string
	r                 kanbanResult
	cards             int
}

// check tells what breaks the invariants, given the creates that
// succeeded.
func (st kanbanState) check(created int64) error {
	var errs []error
	if st.count != int64(len(st.cards)) {
		errs = append(errs, fmt.Errorf("board count %d, %d cards", st.count, len(st.cards)))
	}
	if created != int64(len(st.cards)) {
		errs = append(errs, fmt.Errorf("%d creates succeeded, %d cards", created, len(st.cards)))
	}
	for card, title := range st.cards {
		if holder, ok := st.claims[claimKey(title)]; !ok || holder != card {
			errs = append(errs, fmt.Errorf("card %s (%q): its title's claim names %q", card, title, holder))
		}
	}
	for claim, card := range st.claims {
		title, ok := st.cards[card]
		if !ok || claimKey(title) != claim {
			errs = append(errs, fmt.Errorf("claim %s names card %q, which does not have its title", claim, card))
		}
	}
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Errorf("and %d more", len(errs)-5))
	}
	return errors.Join(errs...)
}

// newKanbanVariant seeds a board (Count 0) in space and returns variant
// v on it.
func newKanbanVariant(ctx context.Context, e *env, v, space string) kanbanVariant {
	b := e.backend(space)
	cards, boards, claims := etagstore.New[Card](b, nil), etagstore.New[Board](b, nil), etagstore.New[TitleClaim](b, nil)
	state := func(ctx context.Context) (kanbanState, error) {
		st := kanbanState{cards: map[string]string{}, claims: map[string]string{}}
		board, err := boards.Get(ctx, boardKey)
		if err != nil {
			return st, err
		}
		st.count = board.Value.Count
		for d, err := range cards.List(ctx, "card-") {
			if err != nil {
				return st, err
			}
			st.cards[d.Key] = d.Value.Title
		}
		for d, err := range claims.List(ctx, "title-") {
			if err != nil {
				return st, err
			}
			st.claims[d.Key] = d.Value.Card
		}
		return st, nil
	}
	taken := func(err error) error {
		if errors.Is(err, etagstore.ErrExists) { // tx.Create's refusal at the commit
			return errTitleTaken
		}
		return err
	}
	switch v {
	case "transact", "transact-read", "naive":
		if _, err := boards.Upsert(ctx, boardKey, Board{}); err != nil {
			log.Fatal(err)
		}
		if v == "naive" {
			return kanbanVariant{naiveKanban(e.table, space), state}
		}
		claim := func(tx *etagstore.Txn, card, title string) error {
			if v == "transact" {
				return taken(create(claims.In(tx), claimKey(title), TitleClaim{Card: card}))
			}
			// transact-read: as the hand-written loop does, read the claim
			// and Put it where it is missing (a read of a key nobody has
			// read, in every member's slot).
			if _, err := claims.In(tx).Get(claimKey(title)); err == nil {
				return errTitleTaken
			} else if !errors.Is(err, etagstore.ErrNotFound) {
				return err
			}
			return claims.In(tx).Put(claimKey(title), TitleClaim{Card: card})
		}
		return kanbanVariant{func(ctx context.Context, card, title string) (runs int, err error) {
			err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
				runs++
				if err := claim(tx, card, title); err != nil {
					return err
				}
				if err := create(cards.In(tx), card, Card{Title: title, Column: "todo"}); err != nil {
					return err
				}
				bd, err := boards.In(tx).Get(boardKey)
				if err != nil {
					return err
				}
				bd.Count++
				return boards.In(tx).Put(boardKey, bd)
			})
			return runs, taken(err)
		}, state}
	case "indexed":
		if _, err := boards.Upsert(ctx, boardKey, Board{}); err != nil {
			log.Fatal(err)
		}
		byTitle := etagstore.Unique("title", func(c Card) string { return strings.ToLower(c.Title) })
		cards := etagstore.New(b, nil, byTitle)
		return kanbanVariant{func(ctx context.Context, card, title string) (runs int, err error) {
			err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
				runs++
				if err := cards.In(tx).Create(card, Card{Title: title, Column: "todo"}); err != nil {
					return err
				}
				bd, err := boards.In(tx).Get(boardKey)
				if err != nil {
					return err
				}
				bd.Count++
				return boards.In(tx).Put(boardKey, bd)
			})
			return runs, taken(err)
		}, indexedState(b, state)}
	case "envelope":
		s := etagstore.New[kanbanDoc](b, nil)
		if _, err := s.Upsert(ctx, boardKey, kanbanDoc{Board: &Board{}}); err != nil {
			log.Fatal(err)
		}
		state = func(ctx context.Context) (kanbanState, error) {
			st := kanbanState{cards: map[string]string{}, claims: map[string]string{}}
			for d, err := range s.List(ctx, "") {
				switch {
				case err != nil:
					return st, err
				case d.Key == boardKey && d.Value.Board != nil:
					st.count = d.Value.Board.Count
				case strings.HasPrefix(d.Key, "card-") && d.Value.Card != nil:
					st.cards[d.Key] = d.Value.Card.Title
				case strings.HasPrefix(d.Key, "title-") && d.Value.Claim != nil:
					st.claims[d.Key] = d.Value.Claim.Card
				default:
					return st, fmt.Errorf("%q holds %+v", d.Key, d.Value)
				}
			}
			return st, nil
		}
		return kanbanVariant{func(ctx context.Context, card, title string) (runs int, err error) {
			_, err = s.Transact(ctx, func(tx *etagstore.Tx[kanbanDoc]) error {
				runs++
				if err := create(tx, claimKey(title), kanbanDoc{Claim: &TitleClaim{Card: card}}); err != nil {
					return taken(err)
				}
				if err := create(tx, card, kanbanDoc{Card: &Card{Title: title, Column: "todo"}}); err != nil {
					return err
				}
				bd, err := tx.Get(boardKey)
				if err != nil {
					return err
				}
				if bd.Board == nil {
					return fmt.Errorf("%q holds no board", boardKey)
				}
				bd.Board.Count++
				return tx.Put(boardKey, bd)
			})
			return runs, taken(err)
		}, state}
	}
	log.Fatalf("kanban: no variant %q", v)
	return kanbanVariant{}
}

// indexedState is state, the board's count and cards, with the claims
// read from the title index's entries (listed raw, so that an entry
// without its card shows): the claim of a title names the card its
// entry names.
func indexedState(b driver.Backend, state func(context.Context) (kanbanState, error)) func(context.Context) (kanbanState, error) {
	return func(ctx context.Context) (kanbanState, error) {
		st, err := state(ctx)
		if err != nil {
			return st, err
		}
		space := b.Abilities().Entries
		scope, err := space.Scope(boardKey)
		if err != nil {
			return st, err
		}
		for it, err := range b.List(ctx, space.Key(scope, "u.title.")) {
			if err != nil {
				return st, err
			}
			var e struct{ Value, Doc string }
			if err := json.Unmarshal(it.Data, &e); err != nil {
				return st, fmt.Errorf("entry %q: %w", it.Key, err)
			}
			st.claims[claimKey(e.Value)] = e.Doc
		}
		return st, nil
	}
}

// kanbanCell runs writers goroutines creating cards with v for d.
func kanbanCell(ctx context.Context, e *env, v kanbanVariant, writers int, d time.Duration) kanbanResult {
	var pool titles
	var mu sync.Mutex
	var res kanbanResult
	before, beforeBatches, beforeLanded := e.requests.n.Load(), e.requests.batches.Load(), e.requests.landed.Load()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var mine kanbanResult
			for i := 0; time.Now().Before(deadline); i++ {
				card := fmt.Sprintf("card-%03d-%06d", w, i)
				t0 := time.Now()
				runs, err := v.create(ctx, card, pool.draw())
				mine.runs += int64(runs)
				switch {
				case err == nil:
					mine.created++
					mine.latency = append(mine.latency, float64(time.Since(t0).Microseconds())/1000)
				case errors.Is(err, errTitleTaken):
					mine.taken++
				default:
					log.Fatalf("%s kanban: %v", e.name, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.created += mine.created
			res.taken += mine.taken
			res.runs += mine.runs
			res.latency = append(res.latency, mine.latency...)
		})
	}
	wg.Wait()
	res.seconds = time.Since(start).Seconds()
	res.requests = e.requests.n.Load() - before
	res.batches = e.requests.batches.Load() - beforeBatches
	res.landed = e.requests.landed.Load() - beforeLanded
	return res
}

// printKanban prints the kanban rows of backend; rtt is the latency the
// proxies add (0: none).
func printKanban(backend string, rows []kanbanRow, rtt time.Duration) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("## %s: kanban\n\n| scenario | variant | creates/s | × naive | taken | requests/create | fn runs/op | p50 ms | p99 ms | commits sent | landed | creates/commit | landed commits/s × RTT | invariants |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", backend)
	naive := map[string]float64{}
	for _, r := range rows {
		if r.variant == "naive" {
			naive[r.scenario] = float64(r.r.created) / r.r.seconds
		}
	}
	for _, r := range rows {
		cps := float64(r.r.created) / r.r.seconds
		ops := r.r.created + r.r.taken
		ratio, rpc, sent, landed, cpc, fill := "—", "—", "—", "—", "—", "—"
		if n := naive[r.scenario]; n > 0 {
			ratio = fmt.Sprintf("%.2f", cps/n)
		}
		if backend != "memory" {
			sent, landed = strconv.FormatInt(r.r.batches, 10), strconv.FormatInt(r.r.landed, 10)
			if r.r.created > 0 {
				rpc = fmt.Sprintf("%.2f", float64(r.r.requests)/float64(r.r.created))
			}
			if r.r.landed > 0 {
				cpc = fmt.Sprintf("%.2f", float64(r.r.created)/float64(r.r.landed))
			}
			if rtt > 0 {
				fill = fmt.Sprintf("%.2f", float64(r.r.landed)/r.r.seconds*rtt.Seconds())
			}
		}
		fmt.Printf("| %s | %s | %.0f | %s | %.1f%% | %s | %.2f | %.2f | %.2f | %s | %s | %s | %s | exact (%d cards) |\n",
			r.scenario, r.variant, cps, ratio, 100*float64(r.r.taken)/float64(max(ops, 1)), rpc,
			float64(r.r.runs)/float64(max(ops, 1)), pct(r.r.latency, 50), pct(r.r.latency, 99), sent, landed, cpc, fill, r.cards)
	}
	fmt.Println()
}

// naiveKanban is the hand-written create on tables: read the claim and the
// board, then one entity group transaction of the claim's and the card's
// inserts and the board's replace If-Match; started again at once when the
// board moved.
func naiveKanban(client *aztables.Client, partition string) kanbanCreate {
	return func(ctx context.Context, card, title string) (runs int, err error) {
		claim := claimKey(title)
		for {
			runs++
			if _, err := client.GetEntity(ctx, partition, claim, nil); err == nil {
				return runs, errTitleTaken
			} else if !notFound(err) {
				return runs, err
			}
			resp, err := client.GetEntity(ctx, partition, boardKey, nil)
			if err != nil {
				return runs, err
			}
			dec := json.NewDecoder(bytes.NewReader(resp.Value))
			dec.UseNumber()
			var board map[string]any
			if err := dec.Decode(&board); err != nil {
				return runs, err
			}
			count, err := strconv.ParseInt(fmt.Sprint(board["Count"]), 10, 64) // Edm.Int64 comes as a string
			if err != nil {
				return runs, fmt.Errorf("board Count %v: %w", board["Count"], err)
			}
			entity := func(row string, props ...string) []byte {
				m := map[string]string{"PartitionKey": partition, "RowKey": row}
				for i := 0; i < len(props); i += 2 {
					m[props[i]] = props[i+1]
				}
				data, _ := json.Marshal(m)
				return data
			}
			etag := resp.ETag
			_, err = client.SubmitTransaction(ctx, []aztables.TransactionAction{
				{ActionType: aztables.TransactionTypeAdd, Entity: entity(claim, "Card", card)},
				{ActionType: aztables.TransactionTypeAdd, Entity: entity(card, "Title", title, "Column", "todo")},
				{ActionType: aztables.TransactionTypeUpdateReplace, IfMatch: &etag,
					Entity: entity(boardKey, "Count", strconv.FormatInt(count+1, 10), "Count@odata.type", "Edm.Int64")},
			}, nil)
			if err == nil {
				return runs, nil
			}
			status, index, ok := batchRefusal(err)
			switch {
			case !ok:
				return runs, err
			case status == http.StatusConflict && index <= 0: // the claim's insert (index 0; -1: not said)
				return runs, errTitleTaken
			case status == http.StatusPreconditionFailed && (index == 2 || index < 0):
				continue // the board moved: again
			}
			return runs, fmt.Errorf("the transaction's action %d refused with %d: %w", index, status, err)
		}
	}
}

func notFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

var (
	innerStatus = regexp.MustCompile(`HTTP/1\.1 ([45]\d\d)`)
	innerIndex  = regexp.MustCompile(`"value"\s*:\s*"(\d+):`)
)

// batchRefusal reads a refused entity group transaction as its user must:
// SubmitTransaction returns a *azcore.ResponseError whose StatusCode is 202
// and ErrorCode empty; the refusal's status is the inner response's, and
// the message starts with the failing action's index ("0:The specified
// entity already exists."); index is -1 when the message does not say.
func batchRefusal(err error) (status, index int, ok bool) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusAccepted || re.RawResponse == nil {
		return 0, 0, false
	}
	body, perr := runtime.Payload(re.RawResponse)
	m := innerStatus.FindSubmatch(body)
	if perr != nil || m == nil {
		return 0, 0, false
	}
	status, _ = strconv.Atoi(string(m[1]))
	index = -1
	if m := innerIndex.FindSubmatch(body); m != nil {
		index, _ = strconv.Atoi(string(m[1]))
	}
	return status, index, true
}

// isBatch tells an entity group transaction (POST …/$batch).
func isBatch(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/$batch")
}

// batchLanded reads the answer to an entity group transaction and reports
// whether all its actions were applied: a 202 whose inner responses are
// all 2xx. It leaves resp's body to be read again.
func batchLanded(resp *http.Response) bool {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && resp.StatusCode == http.StatusAccepted && !innerStatus.Match(body)
}
