package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
)

// transactCases are the conformance cases of Store.Transact. On a backend
// that cannot commit several documents atomically (blobs), each checks
// instead that Transact refuses with errors.ErrUnsupported before fn runs.
var transactCases = []struct {
	name string
	fn   func(t *testing.T, s *etagstore.Store[Page])
}{
	{"Transact", testTransact},
	{"TransactWriteSkew", testTransactWriteSkew},
	{"TransactAbsentWriteSkew", testTransactAbsentWriteSkew},
	{"TransactSeveralTypes", testTransactSeveralTypes},
	{"TransactUpsert", testTransactUpsert},
	{"TransactAbort", testTransactAbort},
	{"TransactTransfers", testTransactTransfers},
	{"TransactTornReadAudit", testTransactTornReadAudit},
	{"TransactCreate", testTransactCreate},
	{"TransactCreateKanban", testTransactCreateKanban},
}

// transacts reports whether s's backend commits atomically; when it does
// not, it checks the refusal.
func transacts(t *testing.T, s *etagstore.Store[Page]) bool {
	t.Helper()
	if s.Backend().Abilities().Commit != nil {
		return true
	}
	ran := false
	_, err := s.Transact(t.Context(), func(*etagstore.Tx[Page]) error { ran = true; return nil })
	if !errors.Is(err, errors.ErrUnsupported) || ran {
		t.Errorf("Transact on a backend without Commit = %v (fn ran: %v), want errors.ErrUnsupported before fn runs", err, ran)
	}
	return false
}

// testTransact: reads see the stored versions and the transaction's own
// writes; the commit writes every Put and Delete at once and returns the
// documents put, with the ETags a Get then sees.
func testTransact(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	a := mustCreate(t, s, "tx-a", Page{Title: "a", N: 10})
	mustCreate(t, s, "tx-gone", Page{Title: "gone"})
	docs, err := s.Transact(ctx, moveAndCreate)
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	if len(docs) != 2 || docs[0].Key != "tx-a" || docs[1].Key != "tx-b" {
		t.Fatalf("Transact returned %+v, want tx-a and tx-b", docs)
	}
	for _, d := range docs {
		got, err := s.Get(ctx, d.Key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(d, got); diff != "" || d.ETag == "" || d.ETag == a.ETag {
			t.Errorf("returned doc vs Get (-returned +stored):\n%s(ETag %q)", diff, d.ETag)
		}
	}
	if _, err := s.Get(ctx, "tx-gone"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("deleted in the transaction: Get = %v, want ErrNotFound", err)
	}
	// An Update of a document a transaction wrote continues its history.
	if _, err := s.Update(ctx, "tx-a", func(p *Page) error { p.N++; return nil }); err != nil {
		t.Errorf("Update after Transact: %v", err)
	}
}

// testTransactWriteSkew: two transactions read A and B, both set, and each
// clears one of them if the other is still set. Serializable, they cannot
// both commit: the one that commits second sees the first's write when it
// runs again, and clears nothing. The second runs in another Store over
// the backend (another process): one Store's concurrent transactions
// would share a batch, and the first, waiting in its fn, would leave it.
func testTransactWriteSkew(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	mustCreate(t, s, "skew-a", Page{N: 1})
	mustCreate(t, s, "skew-b", Page{N: 1})
	clear := func(mine, other string, read chan<- struct{}, wait <-chan struct{}) func(*etagstore.Tx[Page]) error {
		first := true
		return func(tx *etagstore.Tx[Page]) error {
			p, err := tx.Get(mine)
			if err != nil {
				return err
			}
			o, err := tx.Get(other)
			if err != nil {
				return err
			}
			if first { // both have read before either commits
				first = false
				close(read)
				<-wait
			}
			if o.N == 0 {
				return nil // the other is clear: keep mine
			}
			p.N = 0
			return tx.Put(mine, p)
		}
	}
	aRead, bRead := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var aErr, bErr error
	wg.Go(func() { _, aErr = s.Transact(ctx, clear("skew-a", "skew-b", aRead, bRead)) })
	other := etagstore.New[Page](s.Backend(), nil)
	wg.Go(func() { _, bErr = other.Transact(ctx, clear("skew-b", "skew-a", bRead, aRead)) })
	wg.Wait()
	if aErr != nil || bErr != nil {
		t.Fatalf("Transact: %v, %v", aErr, bErr)
	}
	a, _ := s.Get(ctx, "skew-a")
	b, _ := s.Get(ctx, "skew-b")
	if a.Value.N+b.Value.N != 1 {
		t.Errorf("after both transactions A=%d B=%d: exactly one must stay set", a.Value.N, b.Value.N)
	}
}

// testTransactAbsentWriteSkew: two transactions read keys A and B, both
// missing, and each creates its own only if the other is still missing.
// With checks that see absence (Abilities.PureChecks: memstore) they
// cannot both commit: exactly one key exists after them. Tables do not
// check a key a transaction found missing and did not write, and both
// commit: the write skew over absent keys that docs/rules.md names, which
// this case shows as documented. The second runs in another Store, as in
// testTransactWriteSkew.
func testTransactAbsentWriteSkew(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	claim := func(mine, other string, read chan<- struct{}, wait <-chan struct{}) func(*etagstore.Tx[Page]) error {
		first := true
		return func(tx *etagstore.Tx[Page]) error {
			if _, err := tx.Get(mine); !errors.Is(err, etagstore.ErrNotFound) {
				return err // nil: mine exists already (a run after a commit)
			}
			_, err := tx.Get(other)
			if first { // both have read before either commits
				first = false
				close(read)
				<-wait
			}
			if !errors.Is(err, etagstore.ErrNotFound) {
				return err // nil: the other claimed first
			}
			return tx.Put(mine, Page{N: 1})
		}
	}
	aRead, bRead := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var aErr, bErr error
	wg.Go(func() { _, aErr = s.Transact(ctx, claim("absent-a", "absent-b", aRead, bRead)) })
	other := etagstore.New[Page](s.Backend(), nil)
	wg.Go(func() { _, bErr = other.Transact(ctx, claim("absent-b", "absent-a", bRead, aRead)) })
	wg.Wait()
	if aErr != nil || bErr != nil {
		t.Fatalf("Transact: %v, %v", aErr, bErr)
	}
	n := 0
	for _, k := range []string{"absent-a", "absent-b"} {
		if _, err := s.Get(ctx, k); err == nil {
			n++
		}
	}
	exact := s.Backend().Abilities().PureChecks
	switch {
	case exact && n != 1:
		t.Errorf("%d of the two keys exist after both claims; checks of absence allow exactly one", n)
	case !exact && n != 2:
		t.Errorf("%d of the two keys exist; without checks of absence both claims commit, as docs/rules.md says (update it)", n)
	case !exact:
		t.Logf("both claims committed: the write skew over absent keys the backend's documentation names")
	}
}

// testTransactAbort: fn's error, and a panic in fn, write nothing.
func testTransactAbort(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	before := mustCreate(t, s, "abort", Page{N: 1})
	boom := errors.New("boom")
	_, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
		if err := tx.Put("abort", Page{N: 2}); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Errorf("fn's error: Transact = %v, want it as is", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("a panic in fn did not reach the caller")
			}
		}()
		_, _ = s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
			if err := tx.Put("abort", Page{N: 3}); err != nil {
				return err
			}
			panic("in fn")
		})
	}()
	after, err := s.Get(ctx, "abort")
	if err != nil || after.ETag != before.ETag {
		t.Errorf("after an aborted and a panicking transaction: %+v, %v; want it unchanged", after, err)
	}
	if _, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error { return tx.Put("", Page{}) }); !errors.Is(err, etagstore.ErrInvalidKey) {
		t.Errorf("Put of an empty key = %v, want ErrInvalidKey", err)
	}
}

// testTransactTransfers: concurrent transfers among accounts, each also
// counting itself in a ledger document in the same commit. The total is
// conserved, and the ledger counts exactly the transfers that returned
// success.
func testTransactTransfers(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	transfers(t, s, 8, 10, nil)
}

// transfers runs writers × each transfers among 4 accounts and checks the
// total and the ledger. ok, when set, says which failures a transfer may
// end with (faults); by default every one must succeed.
func transfers(t *testing.T, s *etagstore.Store[Page], writers, each int, ok func(error) bool) {
	t.Helper()
	ctx := t.Context()
	accounts := []string{"acct-0", "acct-1", "acct-2", "acct-3"}
	for _, a := range accounts {
		mustCreate(t, s, a, Page{N: 100})
	}
	mustCreate(t, s, "ledger", Page{})
	var mu sync.Mutex
	succeeded, unknown := 0, 0
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				from, to := accounts[(w+i)%4], accounts[(w+i+1+w%3)%4]
				_, err := s.Transact(ctx, transfer(from, to))
				mu.Lock()
				switch {
				case err == nil:
					succeeded++
				case errors.Is(err, etagstore.ErrOutcomeUnknown) && ok != nil && ok(err):
					unknown++
				default:
					t.Errorf("transfer %s → %s: %v", from, to, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := int64(0)
	for _, a := range accounts {
		d, err := s.Get(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		total += d.Value.N
	}
	if total != 400 {
		t.Errorf("total after the transfers = %d, want 400", total)
	}
	l, err := s.Get(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if n := int(l.Value.N); n < succeeded || n > succeeded+unknown {
		t.Errorf("ledger counts %d transfers; %d succeeded and %d are unknown", n, succeeded, unknown)
	}
	t.Logf("%d transfers succeeded, %d unknown, ledger %d", succeeded, unknown, l.Value.N)
}

// moveAndCreate is testTransact's transaction: it moves 3 from tx-a to a
// new tx-b, reads its own writes, and deletes tx-gone.
func moveAndCreate(tx *etagstore.Tx[Page]) error {
	pa, err := tx.Get("tx-a")
	if err != nil {
		return err
	}
	if _, err := tx.Get("tx-b"); !errors.Is(err, etagstore.ErrNotFound) {
		return fmt.Errorf("Get of a missing key = %v, want ErrNotFound", err)
	}
	pa.N -= 3
	if err := tx.Put("tx-a", pa); err != nil {
		return err
	}
	if err := tx.Put("tx-b", Page{Title: "b", N: 3}); err != nil {
		return err
	}
	if got, err := tx.Get("tx-b"); err != nil || got.N != 3 {
		return fmt.Errorf("Get after Put = %+v, %v; want its own write", got, err)
	}
	if err := tx.Delete("tx-gone"); err != nil {
		return err
	}
	if err := tx.Delete("tx-gone"); !errors.Is(err, etagstore.ErrNotFound) {
		return fmt.Errorf("second Delete = %v, want ErrNotFound", err)
	}
	return nil
}

// transfer is the transaction that moves 1 from one account to another and
// counts itself in the ledger.
func transfer(from, to string) func(tx *etagstore.Tx[Page]) error {
	return func(tx *etagstore.Tx[Page]) error {
		f, err := tx.Get(from)
		if err != nil {
			return err
		}
		d, err := tx.Get(to)
		if err != nil {
			return err
		}
		l, err := tx.Get("ledger")
		if err != nil {
			return err
		}
		f.N, d.N, l.N = f.N-1, d.N+1, l.N+1
		return errors.Join(tx.Put(from, f), tx.Put(to, d), tx.Put("ledger", l))
	}
}

// testTransactTornReadAudit: two movers move 1 between audit-a and
// audit-b (which add up to 10) while two read-only audits return an error
// whenever the sum is not 10. An audit that read a before a move and b
// after it must not return that error: its reads are checked again and it
// runs again. No audit error is returned, and the audits ran.
func testTransactTornReadAudit(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	mustCreate(t, s, "audit-a", Page{N: 5})
	mustCreate(t, s, "audit-b", Page{N: 5})
	errTorn := errors.New("audit-a + audit-b is not 10")
	var done atomic.Bool
	var audits, torn atomic.Int64
	var movers, auditors, auditing sync.WaitGroup
	auditing.Add(2) // the moves start once both audits have run once: they overlap
	for m := range 2 {
		movers.Go(func() {
			auditing.Wait()
			for i := range 25 {
				from, to := "audit-a", "audit-b"
				if (m+i)%2 == 1 {
					from, to = to, from
				}
				if _, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
					f, err := tx.Get(from)
					if err != nil {
						return err
					}
					d, err := tx.Get(to)
					if err != nil {
						return err
					}
					f.N, d.N = f.N-1, d.N+1
					return errors.Join(tx.Put(from, f), tx.Put(to, d))
				}); err != nil {
					t.Errorf("move: %v", err)
				}
			}
		})
	}
	for range 2 {
		auditors.Go(func() {
			for first := true; first || !done.Load(); first = false {
				_, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
					a, err := tx.Get("audit-a")
					if err != nil {
						return err
					}
					b, err := tx.Get("audit-b")
					if err != nil {
						return err
					}
					if a.N+b.N != 10 {
						return errTorn
					}
					return nil
				})
				if audits.Add(1); first {
					auditing.Done()
				}
				switch {
				case errors.Is(err, errTorn):
					torn.Add(1)
				case err != nil:
					t.Errorf("audit: %v", err)
				}
			}
		})
	}
	movers.Wait()
	done.Store(true)
	auditors.Wait()
	if torn.Load() != 0 || audits.Load() == 0 {
		t.Errorf("%d of %d audits returned their invariant error from a torn view, want 0 of some", torn.Load(), audits.Load())
	}
}

// testThreeStoresOneKey: three Stores over one backend (three processes)
// with four writers each increment one key, under the default retry
// policy: contention is not failure, so no Update gives up and the
// counter is exact.
func testThreeStoresOneKey(t *testing.T, s *etagstore.Store[Page]) {
	ctx := t.Context()
	mustCreate(t, s, "three-stores", Page{})
	const each = 15
	var wg sync.WaitGroup
	for range 3 {
		p := etagstore.New[Page](s.Backend(), nil)
		for range 4 {
			wg.Go(func() {
				for range each {
					if _, err := p.Update(ctx, "three-stores", func(v *Page) error { v.N++; return nil }); err != nil {
						t.Errorf("Update gave up: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	if d, err := s.Get(ctx, "three-stores"); err != nil || d.Value.N != 3*4*each {
		t.Errorf("counter = %+v, %v; want %d", d.Value, err, 3*4*each)
	}
}

// Card and Board are the documents of the multi-type transaction case: a
// card is on one board, and a board counts its cards.
type (
	Card struct {
		Title string
		Board string
	}
	Board struct {
		Name  string
		Count int
	}
)

// testTransactSeveralTypes: Stores of two document types over one backend
// share a transaction (etagstore.Transact). Sixteen concurrent moves of
// cards between two boards, each moving the card and both boards' counts
// in one commit, leave the counts equal to the cards on each board; after
// a commit, each view reports the new ETags.
func testTransactSeveralTypes(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	cards := etagstore.New[Card](s.Backend(), nil)
	boards := etagstore.New[Board](s.Backend(), nil)
	for _, b := range []Board{{Name: "todo", Count: 4}, {Name: "done"}} {
		if _, err := boards.Create(ctx, "board-"+b.Name, b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if _, err := cards.Create(ctx, fmt.Sprintf("card-%d", i), Card{Title: "c", Board: "todo"}); err != nil {
			t.Fatal(err)
		}
	}
	move := func(card, to string) func(tx *etagstore.Txn) error {
		return func(tx *etagstore.Txn) error {
			c, err := cards.In(tx).Get(card)
			if err != nil || c.Board == to {
				return err
			}
			from, err := boards.In(tx).Get("board-" + c.Board)
			if err != nil {
				return err
			}
			dest, err := boards.In(tx).Get("board-" + to)
			if err != nil {
				return err
			}
			from.Count, dest.Count, c.Board = from.Count-1, dest.Count+1, to
			return errors.Join(cards.In(tx).Put(card, c), boards.In(tx).Put("board-"+from.Name, from), boards.In(tx).Put("board-"+to, dest))
		}
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			if err := etagstore.Transact(ctx, move(fmt.Sprintf("card-%d", g%4), []string{"todo", "done"}[g%2])); err != nil {
				t.Errorf("move: %v", err)
			}
		})
	}
	wg.Wait()
	on := map[string]int{}
	for i := range 4 {
		c, err := cards.Get(ctx, fmt.Sprintf("card-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		on[c.Value.Board]++
	}
	for _, name := range []string{"todo", "done"} {
		b, err := boards.Get(ctx, "board-"+name)
		if err != nil || b.Value.Count != on[name] {
			t.Errorf("board %s counts %d (%v); %d cards are on it", name, b.Value.Count, err, on[name])
		}
	}
	var txn *etagstore.Txn
	if err := etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
		txn = tx
		return move("card-0", map[string]string{"todo": "done", "done": "todo"}[mustGetCard(t, cards, "card-0").Board])(tx)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := cards.In(txn).ETag("card-0")
	if d, gerr := cards.Get(ctx, "card-0"); err != nil || gerr != nil || got != d.ETag {
		t.Errorf("after the commit In(tx).ETag = %q, %v; Get has %q", got, err, d.ETag)
	}
	if err := cards.In(txn).Put("card-0", Card{}); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("Put after the commit = %v, want ErrInvalidInput", err)
	}
}

func mustGetCard(t *testing.T, cards *etagstore.Store[Card], key string) Card {
	t.Helper()
	d, err := cards.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return d.Value
}

// testTransactUpsert: Tx.Upsert writes with no condition and reads
// nothing, so another writer's change to the key between the Upsert and
// the commit does not make the transaction run again, and the upserted
// value wins; the Put of a key it read commits with it.
func testTransactUpsert(t *testing.T, s *etagstore.Store[Page]) {
	if !transacts(t, s) {
		return
	}
	ctx := t.Context()
	mustCreate(t, s, "upsert-old", Page{Title: "old", N: 1})
	mustCreate(t, s, "upsert-read", Page{N: 1})
	other := etagstore.New[Page](s.Backend(), nil)
	runs := 0
	docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
		runs++
		if err := tx.Upsert("upsert-old", Page{Title: "upserted"}); err != nil {
			return err
		}
		if err := tx.Upsert("upsert-new", Page{Title: "new"}); err != nil {
			return err
		}
		if runs == 1 { // another writer changes the upserted key before the commit
			if _, err := other.Update(ctx, "upsert-old", func(p *Page) error { p.N = 99; return nil }); err != nil {
				return err
			}
		}
		p, err := tx.Get("upsert-read")
		if err != nil {
			return err
		}
		p.N++
		return tx.Put("upsert-read", p)
	})
	if err != nil || runs != 1 || len(docs) != 3 {
		t.Fatalf("Transact = %d docs, %v after %d runs; want 3 docs after 1 run", len(docs), err, runs)
	}
	for key, want := range map[string]Page{"upsert-old": {Title: "upserted"}, "upsert-new": {Title: "new"}, "upsert-read": {N: 2}} {
		d, err := s.Get(ctx, key)
		if err != nil || d.Value != want {
			t.Errorf("%s = %+v, %v; want %+v", key, d.Value, err, want)
		}
	}
}
