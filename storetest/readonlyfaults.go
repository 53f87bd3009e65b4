package storetest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etagstore/etagstore"
)

// Transactions that write nothing, under write faults. A read-only
// transaction is validated by a commit of checks alone (a backend with
// PureChecks) or by reading its documents again; neither writes, so a
// lost or throttled answer is checked again within the policy, and the
// transaction ends with nil or fn's own error: never a transport error,
// never ErrOutcomeUnknown.

// faultyTransfersWithAudits: writers × each transfers among 4 accounts,
// each counted in a ledger in the same commit, while auditors run
// read-only transactions (each at least 2 × each, and until the transfers
// end) that sum the accounts and return errAudit when the sum is not 400. Every audit returns nil (its reads were current
// together, and checking them wrote nothing); transfers succeed or are
// unknown; the total is conserved and the ledger counts the transfers.
func faultyTransfersWithAudits(t *testing.T, s *etagstore.Store[Page], writers, each, auditors int) {
	ctx := t.Context()
	accounts := []string{"acct-0", "acct-1", "acct-2", "acct-3"}
	for _, a := range accounts {
		mustCreate(t, s, a, Page{N: 100})
	}
	mustCreate(t, s, "ledger", Page{})
	errAudit := errors.New("the accounts do not add up to 400")
	var succeeded, unknown, audits atomic.Int64
	var stop atomic.Bool
	var moving, auditing sync.WaitGroup
	for w := range writers {
		moving.Go(func() {
			for i := range each {
				from, to := accounts[(w+i)%4], accounts[(w+i+1+w%3)%4]
				_, err := s.Transact(ctx, transfer(from, to))
				switch {
				case err == nil:
					succeeded.Add(1)
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					wantOneSentinel(t, err)
					unknown.Add(1)
				default:
					t.Errorf("transfer %s → %s: %v", from, to, err)
				}
			}
		})
	}
	for range auditors {
		auditing.Go(func() {
			for n := 0; n < 2*each || !stop.Load(); n++ {
				sum := int64(0)
				_, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
					sum = 0
					for _, a := range accounts {
						p, err := tx.Get(a)
						if err != nil {
							return err
						}
						sum += p.N
					}
					if sum != 400 {
						return errAudit
					}
					return nil
				})
				audits.Add(1)
				if err != nil {
					t.Errorf("read-only audit = %v (sum %d), want nil", err, sum)
				}
			}
		})
	}
	moving.Wait()
	stop.Store(true)
	auditing.Wait()
	total := int64(0)
	for _, a := range accounts {
		d, err := readThrough(t, s, a)
		if err != nil {
			t.Fatal(err)
		}
		total += d.Value.N
	}
	l, err := readThrough(t, s, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if n := l.Value.N; total != 400 || n < succeeded.Load() || n > succeeded.Load()+unknown.Load() {
		t.Errorf("total %d (want 400), ledger %d; %d transfers succeeded and %d are unknown", total, n, succeeded.Load(), unknown.Load())
	}
	t.Logf("%d transfers succeeded, %d unknown; %d audits", succeeded.Load(), unknown.Load(), audits.Load())
}

// The multi-key linearizability check: clients run transactions over
// three accounts — a move of 1 from one to another, an add of one's value
// (mod 3, plus 1) to another (it reads a key it does not write), and a
// read-only snapshot of all three — and porcupine checks that the history
// is that of one register of three values, each snapshot returning the
// values at one instant. An operation whose outcome is unknown may take
// effect at any time after its call.

type mkOp uint8

const (
	mkSnapshot mkOp = iota
	mkMove
	mkAdd
)

type mkInput struct {
	op       mkOp
	from, to int
}

type mkOutput struct {
	unknown bool
	values  mkState // a snapshot's
}

type mkState [3]int64

// mkKeys are the accounts of the check.
var mkKeys = [3]string{"mk-0", "mk-1", "mk-2"}

// apply is the state after in's write.
func (in mkInput) apply(s mkState) mkState {
	switch in.op {
	case mkMove:
		s[in.from]--
		s[in.to]++
	case mkAdd:
		s[in.to] += s[in.from]%3 + 1
	}
	return s
}

var multiKeyModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{mkState{10, 10, 10}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(mkState), input.(mkInput), output.(mkOutput)
		switch {
		case in.op == mkSnapshot && out.values != s:
			return nil
		case in.op == mkSnapshot:
			return []any{s}
		case out.unknown:
			return []any{s, in.apply(s)}
		}
		return []any{in.apply(s)}
	},
	Equal: func(a, b any) bool { return a.(mkState) == b.(mkState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(mkInput), output.(mkOutput)
		switch {
		case in.op == mkSnapshot:
			return fmt.Sprintf("snapshot -> %v", out.values)
		case out.unknown:
			return fmt.Sprintf("%s(%d, %d) -> unknown", [...]string{"", "move", "add"}[in.op], in.from, in.to)
		}
		return fmt.Sprintf("%s(%d, %d)", [...]string{"", "move", "add"}[in.op], in.from, in.to)
	},
}

// checkTransactionsLinearizable runs clients × opsEach random transactions
// over mkKeys (a third of them read-only snapshots) and checks the history
// with porcupine. A transaction fails only with an unknown outcome, and a
// snapshot never.
func checkTransactionsLinearizable(t *testing.T, s *etagstore.Store[Page], clients, opsEach int) {
	ctx := t.Context()
	for _, k := range mkKeys {
		mustCreate(t, s, k, Page{N: 10})
	}
	var mu sync.Mutex
	var ops []porcupine.Operation
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 11))
			for range opsEach {
				from := rng.IntN(3)
				in := mkInput{op: mkOp(rng.IntN(3)), from: from, to: (from + 1 + rng.IntN(2)) % 3}
				var out mkOutput
				call := int64(time.Since(start))
				_, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
					var cur mkState
					for i, k := range mkKeys {
						p, err := tx.Get(k)
						if err != nil {
							return err
						}
						cur[i] = p.N
					}
					if in.op == mkSnapshot {
						out.values = cur
						return nil
					}
					next := in.apply(cur)
					return errors.Join(tx.Put(mkKeys[in.from], Page{N: next[in.from]}), tx.Put(mkKeys[in.to], Page{N: next[in.to]}))
				})
				ret := int64(time.Since(start))
				switch {
				case err == nil:
				case in.op != mkSnapshot && errors.Is(err, etagstore.ErrOutcomeUnknown):
					wantOneSentinel(t, err)
					out, ret = mkOutput{unknown: true}, math.MaxInt64 // it may take effect at any time after its call
				default:
					t.Errorf("%s = %v, want nil", multiKeyModel.DescribeOperation(in, mkOutput{}), err)
					continue
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	snapshots := 0
	for _, op := range ops {
		if op.Input.(mkInput).op == mkSnapshot {
			snapshots++
		}
	}
	t.Logf("%d transactions, %d of them read-only snapshots", len(ops), snapshots)
	switch res := porcupine.CheckOperationsTimeout(multiKeyModel.ToModel(), ops, 30*time.Second); res {
	case porcupine.Ok:
	case porcupine.Illegal:
		t.Errorf("history of %d transactions over %v is not linearizable", len(ops), mkKeys)
	default:
		t.Errorf("linearizability check of %d transactions timed out", len(ops))
	}
}
