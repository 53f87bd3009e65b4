package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// The linearizability check: several clients run random Get, Update
// (increment, creating if missing; on a backend with transactions, some of
// them as a Transact of the one key), Upsert, Replace and Delete (with the
// ETag they last saw, often stale, or ETagAny) on a few keys; porcupine then
// checks that the recorded history, ETags included, is that of one
// register per key. Every Update's returned value is checked exactly: it
// must be the register's value right after its own increment. An operation
// whose outcome is unknown may take effect at any time after its call.

type opKind uint8

const (
	opGet opKind = iota
	opUpdate
	opReplace
	opDelete
	opUpsert
)

func (k opKind) String() string {
	return [...]string{"Get", "Update", "Replace", "Delete", "Upsert"}[k]
}

type regInput struct {
	op    opKind
	tx    bool // an Update made as a Transact of the one key
	key   string
	etag  etagstore.ETag // Replace, Delete: the ETag sent
	value int64          // Replace, Upsert: the value written
}

// regOutput is what the call returned. unknown marks a call whose outcome
// cannot be known (it failed for a reason other than the rules); the model
// lets it either take effect or not.
type regOutput struct {
	notFound bool
	conflict bool
	unknown  bool
	value    int64
	etag     etagstore.ETag
}

type regState struct {
	exists bool
	value  int64
	etag   etagstore.ETag
}

// unknownETag stands for the ETag of a version written by an operation
// whose outcome is unknown: nobody saw it, any observation may fix it.
const unknownETag etagstore.ETag = "?"

// seenETag is the ETag of the state an operation reported: unknown when
// the operation's state was never stored as a version of its own (a
// superseded ETag: a group-commit member before the last, or a write whose
// response was lost, found committed with later writes after it), whose
// real ETag nobody saw.
func seenETag(e etagstore.ETag) etagstore.ETag {
	if e == "" || driver.IsSuperseded(e) {
		return unknownETag
	}
	return e
}

func etagMatches(s regState, etag etagstore.ETag) bool {
	return etag == etagstore.ETagAny || s.etag == unknownETag || s.etag == etag
}

// stale reports whether a write holding etag may be refused with 412 in s.
func stale(s regState, etag etagstore.ETag) bool {
	return etag != etagstore.ETagAny && (s.etag != etag || s.etag == unknownETag)
}

var registerModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		var next []any
		if out.unknown {
			next = append(next, s) // it may not have happened, or:
		}
		switch in.op {
		case opGet:
			if out.notFound && !s.exists || s.exists && out.value == s.value && etagMatches(s, out.etag) {
				next = append(next, regState{exists: s.exists, value: s.value, etag: out.etag})
			}
		case opUpdate:
			want := s.value + 1
			if !s.exists {
				want = 1
			}
			switch {
			case out.unknown:
				next = append(next, regState{exists: true, value: want, etag: unknownETag})
			case !out.notFound && !out.conflict && out.value == want:
				next = append(next, regState{exists: true, value: out.value, etag: seenETag(out.etag)})
			}
		case opReplace:
			switch {
			case out.unknown:
				if s.exists && etagMatches(s, in.etag) {
					next = append(next, regState{exists: true, value: in.value, etag: unknownETag})
				}
			case out.notFound:
				if !s.exists {
					next = append(next, s)
				}
			case out.conflict:
				if s.exists && stale(s, in.etag) {
					next = append(next, s)
				}
			default:
				if s.exists && etagMatches(s, in.etag) {
					next = append(next, regState{exists: true, value: in.value, etag: seenETag(out.etag)})
				}
			}
		case opUpsert:
			switch {
			case out.unknown:
				next = append(next, regState{exists: true, value: in.value, etag: unknownETag})
			case !out.notFound && !out.conflict && out.value == in.value:
				next = append(next, regState{exists: true, value: in.value, etag: seenETag(out.etag)})
			}
		case opDelete:
			switch {
			case out.unknown:
				if s.exists && etagMatches(s, in.etag) {
					next = append(next, regState{})
				}
			case out.notFound:
				if !s.exists {
					next = append(next, s)
				}
			case out.conflict:
				if s.exists && stale(s, in.etag) {
					next = append(next, s)
				}
			default:
				if s.exists && etagMatches(s, in.etag) {
					next = append(next, regState{})
				}
			}
		}
		return next
	},
	Equal: func(a, b any) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return fmt.Sprintf("%s(%s, %s, %d) -> %+v", in.op, in.key, in.etag, in.value, out)
	},
}

// History records operations for a linearizability check. It is safe for
// concurrent use.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(client int, in regInput, call int64, out regOutput) {
	ret := h.now()
	if out.unknown {
		ret = math.MaxInt64 // it may take effect at any time after its call
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// classify turns a Store result into a regOutput. ErrOutcomeUnknown is
// allowed only under faults; any other error outside the rules fails the
// test.
func classify(t *testing.T, d etagstore.Doc[Page], err error, faults bool) regOutput {
	t.Helper()
	if err != nil {
		wantOneSentinel(t, err)
	}
	switch {
	case err == nil:
		return regOutput{value: d.Value.N, etag: d.ETag}
	case faults && errors.Is(err, etagstore.ErrOutcomeUnknown):
		return regOutput{unknown: true}
	case errors.Is(err, etagstore.ErrNotFound):
		return regOutput{notFound: true}
	case errors.Is(err, etagstore.ErrConflict):
		return regOutput{conflict: true}
	default:
		t.Errorf("unexpected error: %v", err)
		return regOutput{unknown: true}
	}
}

func testLinearizable(t *testing.T, s *etagstore.Store[Page]) {
	checkLinearizable(t, s, 8, 40, false)
}

// checkLinearizable runs clients × opsEach random operations and checks the
// history with porcupine.
func checkLinearizable(t *testing.T, s *etagstore.Store[Page], clients, opsEach int, faults bool) {
	keys := []string{"k1", "k2", "k3"}
	ctx := t.Context()
	h := &history{start: time.Now()}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			seen := map[string]etagstore.ETag{}
			for i := range opsEach {
				key := keys[rng.IntN(len(keys))]
				in := regInput{key: key, etag: seen[key]}
				call := h.now()
				if in.etag == "" || rng.IntN(8) == 0 {
					in.etag = etagstore.ETagAny // sometimes last writer wins on purpose
				}
				d, err := randomOp(ctx, s, rng, &in, int64(1000*(c+1)+i))
				if in.op == opGet || in.op == opUpdate || in.op == opUpsert {
					in.etag = ""
				}
				out := classify(t, d, err, faults)
				h.add(c, in, call, out)
				if out.etag != "" {
					seen[key] = out.etag
				}
				if rng.IntN(3) == 0 { // sometimes learn the current ETag
					if cur, err := s.Get(ctx, key); err == nil {
						seen[key] = cur.ETag
					}
				}
			}
		})
	}
	wg.Wait()
	counts := map[opKind]int{}
	transactions := 0
	for _, op := range h.ops {
		if out := op.Output.(regOutput); !out.notFound && !out.conflict && !out.unknown {
			counts[op.Input.(regInput).op]++
			if op.Input.(regInput).tx {
				transactions++
			}
		}
	}
	t.Logf("%d operations; successful: %d Get, %d Update (%d of them Transact), %d Upsert, %d Replace, %d Delete", len(h.ops), counts[opGet], counts[opUpdate], transactions, counts[opUpsert], counts[opReplace], counts[opDelete])
	if counts[opUpdate] == 0 || counts[opReplace] == 0 || counts[opDelete] == 0 || counts[opUpsert] == 0 {
		t.Errorf("the history lacks successful writes of some kind: %v", counts)
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel.ToModel(), h.ops, 30*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("etagstore-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(registerModel.ToModel(), info, path); err != nil {
			path = "(visualization failed: " + err.Error() + ")"
		}
		t.Errorf("history of %d operations is not linearizable; see %s and %s", len(h.ops), path, dumpStuck(info, h.ops, path+".txt"))
	default:
		t.Errorf("linearizability check timed out (%d operations)", len(h.ops))
	}
}

// dumpStuck writes, per partition, the end of the longest partial
// linearization and the earliest operations of that key left out of it:
// where to look first. It returns the file's path.
func dumpStuck(info porcupine.LinearizationInfo, ops []porcupine.Operation, path string) string {
	var b strings.Builder
	describe := func(op porcupine.Operation) string {
		return fmt.Sprintf("client %d [%d µs, %d µs] %s", op.ClientId, op.Call/1e3, op.Return/1e3, registerModel.DescribeOperation(op.Input, op.Output))
	}
	type id struct {
		client int
		call   int64
	}
	for p, partials := range info.PartialLinearizationsOperations() {
		var longest []porcupine.Operation
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == 0 {
			continue
		}
		key := longest[0].Input.(regInput).key
		in := map[id]bool{}
		for _, op := range longest {
			in[id{op.ClientId, op.Call}] = true
		}
		fmt.Fprintf(&b, "partition %d (key %s): longest partial linearization %d operations; its end:\n", p, key, len(longest))
		for _, op := range longest[max(0, len(longest)-15):] {
			fmt.Fprintf(&b, "  %s\n", describe(op))
		}
		var left []porcupine.Operation
		for _, op := range ops {
			if op.Input.(regInput).key == key && !in[id{op.ClientId, op.Call}] {
				left = append(left, op)
			}
		}
		slices.SortFunc(left, func(a, c porcupine.Operation) int { return cmpInt(a.Call, c.Call) })
		fmt.Fprintf(&b, "earliest operations left out (%d in all):\n", len(left))
		for _, op := range left[:min(12, len(left))] {
			fmt.Fprintf(&b, "  %s\n", describe(op))
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "(" + err.Error() + ")"
	}
	return path
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// incrementInTransaction is an Update (increment, creating if missing) made
// as a transaction of one key: in the model it is an Update.
func incrementInTransaction(ctx context.Context, s *etagstore.Store[Page], key string) (etagstore.Doc[Page], error) {
	docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Page]) error {
		p, err := tx.Get(key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		p.N++
		return tx.Put(key, p)
	})
	if err != nil {
		return etagstore.Doc[Page]{}, err
	}
	return docs[0], nil
}

// randomOp runs one random operation on in.key, filling in the rest of in;
// value is what a Replace or Upsert writes.
func randomOp(ctx context.Context, s *etagstore.Store[Page], rng *rand.Rand, in *regInput, value int64) (d etagstore.Doc[Page], err error) {
	key := in.key
	switch r := rng.IntN(20); {
	case r < 5:
		in.op = opGet
		return s.Get(ctx, key)
	case r < 11 || r < 12 && s.Backend().Abilities().Commit == nil:
		in.op = opUpdate
		return s.Update(ctx, key, func(p *Page) error { p.N++; return nil }, etagstore.CreateIfMissing())
	case r < 12:
		in.op, in.tx = opUpdate, true
		return incrementInTransaction(ctx, s, key)
	case r < 13:
		in.op, in.value = opUpsert, value
		return s.Upsert(ctx, key, Page{N: value})
	case r < 17:
		in.op, in.value = opReplace, value
		return s.Replace(ctx, etagstore.Doc[Page]{Key: key, Value: Page{N: value}, ETag: in.etag})
	}
	in.op = opDelete
	return etagstore.Doc[Page]{}, s.Delete(ctx, key, in.etag)
}
