package tablestore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// heldTable is a tablestore Backend whose write of a key ending in "hold"
// waits for hold: the one-key transaction that writes it holds the
// Store's queue, so that callers arriving meanwhile go in one batch.
type heldTable struct {
	*tablestore.Backend
	mu       sync.Mutex
	hold     chan struct{}
	entered  chan struct{}
	commits  atomic.Int64
	loseNext atomic.Bool // the next commit holding a delete lands, and its answer is lost
}

func (h *heldTable) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	if strings.HasSuffix(key, "hold") {
		h.mu.Lock()
		hold, entered := h.hold, h.entered
		h.mu.Unlock()
		entered <- struct{}{}
		<-hold
	}
	return h.Backend.Write(ctx, key, w)
}

func (h *heldTable) Abilities() driver.Abilities {
	a := h.Backend.Abilities()
	commit := a.Commit
	a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		h.commits.Add(1)
		etags, err := commit(ctx, actions)
		for _, ac := range actions {
			if ac.Delete && err == nil && h.loseNext.CompareAndSwap(true, false) {
				return nil, errors.New("round3: connection reset after the transaction landed")
			}
		}
		return etags, err
	}
	return a
}

func newHeldTable(t *testing.T, partition string) *heldTable {
	var o *tablestore.Options
	if partition != "" {
		o = &tablestore.Options{Partition: partition}
	}
	return &heldTable{Backend: tablestore.New(azuritetest.NewTable(t), o)}
}

// waitInTransact waits until n goroutines wait in Store.Transact's queue
// (or for their batch): polled, without sleeping.
func waitInTransact(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	buf := make([]byte, 8<<20)
	for time.Now().Before(deadline) {
		m := runtime.Stack(buf, true)
		if strings.Count(string(buf[:m]), ").txAwait(") >= n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d callers never queued", n)
}

// inOneBatch runs hold (a Transact writing the hold key), and members
// once all of them are queued behind it: they go in one batch.
func inOneBatch(t *testing.T, h *heldTable, hold func(), members ...func()) {
	t.Helper()
	h.mu.Lock()
	h.hold, h.entered = make(chan struct{}), make(chan struct{}, 1)
	release := h.hold
	entered := h.entered
	h.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(hold)
	<-entered
	for i, m := range members {
		wg.Go(m)
		waitInTransact(t, 2+i) // queued in this order
	}
	close(release)
	wg.Wait()
}

func incTask(key string) func(tx *etagstore.Tx[Task]) error {
	return func(tx *etagstore.Tx[Task]) error {
		v, err := tx.Get(key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			return err
		}
		v.N++
		return tx.Put(key, v)
	}
}

func holdTask(t *testing.T, s *etagstore.Store[Task], key string) func() {
	return func() {
		if _, err := s.Transact(t.Context(), func(tx *etagstore.Tx[Task]) error { return tx.Upsert(key, Task{}) }); err != nil {
			t.Errorf("hold: %v", err)
		}
	}
}

// Keys "PK/RK" (no Options.Partition): members in several partitions in
// one queue; each commits, the one across partitions is refused.
func TestTxBatchTablesPartitionsBatch(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "")
	s := etagstore.New[Task](h, nil)
	var members []func()
	for _, k := range []string{"p1/a", "p2/b", "p1/c", "p3/d", "p2/e"} {
		members = append(members, func() {
			if docs, err := s.Transact(ctx, incTask(k)); err != nil || len(docs) != 1 {
				t.Errorf("%s: %v %v", k, docs, err)
			}
		})
	}
	members = append(members, func() {
		if docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			return errors.Join(incTask("p1/a")(tx), incTask("p1/c")(tx))
		}); err != nil || len(docs) != 2 {
			t.Errorf("p1 pair: %v %v", docs, err)
		}
	}, func() {
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			return errors.Join(tx.Put("p1/x", Task{N: 1}), tx.Put("p2/x", Task{N: 1}))
		})
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("across partitions: %v, want ErrInvalidInput", err)
		}
	})
	inOneBatch(t, h, holdTask(t, s, "h/hold"), members...)
	for k, want := range map[string]int64{"p1/a": 2, "p1/c": 2, "p2/b": 1, "p3/d": 1, "p2/e": 1} {
		if d, err := s.Get(ctx, k); err != nil || d.Value.N != want {
			t.Errorf("%s = %+v %v, want N=%d", k, d.Value, err, want)
		}
	}
	for _, k := range []string{"p1/x", "p2/x"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, etagstore.ErrNotFound) {
			t.Errorf("%s: %v, want not found", k, err)
		}
	}
	t.Logf("commits: %d", h.commits.Load())
}

// A read-only transaction over two partitions: alone it succeeds (its
// reads are read again); through the queue it is refused.
func TestTxBatchTablesReadOnlyAcrossPartitions(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), nil)
	seed := etagstore.New[Task](b, nil)
	for _, k := range []string{"p1/a", "p2/b"} {
		if _, err := seed.Create(ctx, k, Task{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, grouped := range []bool{false, true} {
		s := etagstore.New[Task](b, &etagstore.Options{DisableGroupCommit: !grouped})
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			_, e1 := tx.Get("p1/a")
			_, e2 := tx.Get("p2/b")
			return errors.Join(e1, e2)
		})
		t.Logf("grouped=%v: %v", grouped, err)
		if err != nil {
			t.Errorf("read-only over two partitions, grouped=%v: %v", grouped, err)
		}
	}
}

// More than 100 entities across members: each commits; the batch splits.
func TestTxBatchTablesOver100(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	s := etagstore.New[Task](h, nil)
	var members []func()
	for m := range 3 {
		members = append(members, func() {
			docs, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
				for k := range 40 {
					if err := incTask(fmt.Sprintf("m%d-%02d", m, k))(tx); err != nil {
						return err
					}
				}
				return incTask("shared")(tx)
			})
			if err != nil || len(docs) != 41 {
				t.Errorf("member %d: %d docs, %v", m, len(docs), err)
			}
		})
	}
	inOneBatch(t, h, holdTask(t, s, "hold"), members...)
	if d, err := s.Get(ctx, "shared"); err != nil || d.Value.N != 3 {
		t.Errorf("shared = %+v %v", d.Value, err)
	}
	n := 0
	for d, err := range s.List(ctx, "m") {
		if err != nil || d.Value.N != 1 {
			t.Errorf("%s = %+v %v", d.Key, d.Value, err)
		}
		n++
	}
	if n != 120 {
		t.Errorf("%d member keys, want 120", n)
	}
	t.Logf("commits: %d", h.commits.Load())
}

// One batch of the older type's writes on tables: bumps of one document
// (Merge of changes), a delete then a create of another (T alone, anew),
// an upsert then a Put of a third (T alone).
func TestTxBatchTablesBatchRewrites(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	newer := etagstore.New[storetest.Newer](h, nil)
	older := etagstore.New[storetest.Older](h, nil)
	full := func(title string) storetest.Newer {
		n := storetest.Newer{Title: title, N: 0, I8: -8, U64: 1<<63 + 5, F32: 1.5, Bytes: []byte{0, 1}, ID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", List: []string{"a"}}
		n.Addr.City, n.Addr.Zip = "Lyon", "69001"
		n.Items = append(n.Items, struct {
			Name string
			Qty  int
		}{"pen", 3})
		return n
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := newer.Create(ctx, k, full(k)); err != nil {
			t.Fatal(err)
		}
	}
	bump := func(tx *etagstore.Tx[storetest.Older]) error {
		o, err := tx.Get("k1")
		if err != nil {
			return err
		}
		o.N++
		o.Addr.City += "+"
		o.Items[0].Name += "+"
		return tx.Put("k1", o)
	}
	docs := make([][]etagstore.Doc[storetest.Older], 6)
	errs := make([]error, 6)
	fns := []func(tx *etagstore.Tx[storetest.Older]) error{
		bump, bump,
		func(tx *etagstore.Tx[storetest.Older]) error { return tx.Delete("k2") },
		func(tx *etagstore.Tx[storetest.Older]) error { return tx.Put("k2", storetest.Older{Title: "new"}) },
		func(tx *etagstore.Tx[storetest.Older]) error { return tx.Upsert("k3", storetest.Older{Title: "u"}) },
		func(tx *etagstore.Tx[storetest.Older]) error {
			o, err := tx.Get("k3")
			if err != nil {
				return err
			}
			o.N = 7
			return tx.Put("k3", o)
		},
	}
	var members []func()
	for i, fn := range fns {
		members = append(members, func() { docs[i], errs[i] = older.Transact(ctx, fn) })
	}
	inOneBatch(t, h, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
			return tx.Upsert("hold", storetest.Older{})
		}); err != nil {
			t.Errorf("hold: %v", err)
		}
	}, members...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
	want1 := full("k1")
	want1.N, want1.Addr.City, want1.Items[0].Name = 2, "Lyon++", "pen++"
	for k, want := range map[string]storetest.Newer{"k1": want1, "k2": {Title: "new"}, "k3": {Title: "u", N: 7}} {
		got, err := newer.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got.Value); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
		for i, ds := range docs {
			for _, d := range ds {
				if d.Key == k {
					t.Logf("member %d: %s ETag %s (stored %s)", i, k, d.ETag, got.ETag)
				}
			}
		}
	}
	if d, _ := newer.Get(ctx, "k1"); len(docs[1]) != 1 || docs[1][0].ETag != d.ETag {
		t.Errorf("the last bump's doc: %+v, stored ETag %s", docs[1], d.ETag)
	}
	t.Logf("commits: %d", h.commits.Load())
}

// A transaction on its own: Delete, Put, Delete of a stored key;
// Put, Delete, Put of a key created in it; Delete then Put (T alone).
func TestTxBatchTablesSoloRewrites(t *testing.T) {
	ctx := t.Context()
	b := tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
	newer := etagstore.New[storetest.Newer](b, nil)
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			older := etagstore.New[storetest.Older](b, &etagstore.Options{DisableGroupCommit: !grouped})
			pre := fmt.Sprint(grouped)
			a, bb, c := pre+"a", pre+"b", pre+"c"
			for _, k := range []string{a, c} {
				n := storetest.Newer{Title: k, I8: 3}
				n.Addr.Zip = "z"
				if _, err := newer.Create(ctx, k, n); err != nil {
					t.Fatal(err)
				}
			}
			docs, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
				return errors.Join(tx.Delete(a), tx.Put(a, storetest.Older{Title: "x"}), tx.Delete(a))
			})
			if err != nil || len(docs) != 0 {
				t.Errorf("delete, put, delete: %v %v", docs, err)
			}
			if _, err := newer.Get(ctx, a); !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("%s after delete, put, delete: %v, want not found", a, err)
			}
			docs, err = older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
				return errors.Join(tx.Put(bb, storetest.Older{Title: "1"}), tx.Delete(bb), tx.Put(bb, storetest.Older{Title: "2"}))
			})
			got, gerr := newer.Get(ctx, bb)
			if err != nil || len(docs) != 1 || gerr != nil || got.Value.Title != "2" || docs[0].ETag != got.ETag {
				t.Errorf("put, delete, put: %v %v; stored %+v %v", docs, err, got, gerr)
			}
			runs := 0
			other := etagstore.New[storetest.Newer](b, &etagstore.Options{DisableGroupCommit: true})
			docs, err = older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error {
				runs++
				if err := tx.Delete(c); err != nil {
					return err
				}
				if runs == 1 { // the stored version moves on: the If-Match of the create again fails
					if _, err := other.Update(ctx, c, func(n *storetest.Newer) error { n.I8++; return nil }); err != nil {
						return err
					}
				}
				return tx.Put(c, storetest.Older{Title: "c2"})
			})
			got, gerr = newer.Get(ctx, c)
			if err != nil || len(docs) != 1 || gerr != nil || docs[0].ETag != got.ETag || runs != 2 {
				t.Errorf("delete then put: %v %v, %d runs; stored %+v %v", docs, err, runs, got, gerr)
			}
			if diff := cmp.Diff(storetest.Newer{Title: "c2"}, got.Value); diff != "" {
				t.Errorf("delete then put: T alone (-want +got):\n%s", diff)
			}
		})
	}
}

// A read-only member, in one batch behind a writer: its reads are read
// again, as on its own (tables cannot check an absent key in a commit).
func TestTxBatchTablesReadOnlyMemberTornAbsence(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	s := etagstore.New[Task](h, &etagstore.Options{CacheSize: -1})
	other := etagstore.New[Task](h, &etagstore.Options{DisableGroupCommit: true})
	if _, err := s.Create(ctx, "k", Task{}); err != nil {
		t.Fatal(err)
	}
	var sawMissing bool
	var sawK int64
	runs := 0
	inOneBatch(t, h, holdTask(t, s, "hold"), func() {
		if _, err := s.Transact(ctx, incTask("j")); err != nil {
			t.Errorf("writer: %v", err)
		}
	}, func() {
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
			runs++
			_, err := tx.Get("x")
			sawMissing = errors.Is(err, etagstore.ErrNotFound)
			if runs == 1 {
				if _, err := other.Create(ctx, "x", Task{N: 1}); err != nil {
					return err
				}
				if _, err := other.Update(ctx, "k", func(v *Task) error { v.N = 1; return nil }); err != nil {
					return err
				}
			}
			v, err := tx.Get("k")
			sawK = v.N
			return err
		})
		if err != nil {
			t.Errorf("reader: %v", err)
		}
	})
	t.Logf("reader: %d runs, x missing %v, k.N %d", runs, sawMissing, sawK)
	if sawMissing && sawK == 1 {
		t.Errorf("the reader returned on x missing and k.N == 1: never current together")
	}
}

// A read-only member of a batch whose commit's answer is lost and cannot
// be resolved (a delete) gets no unknown outcome: it wrote nothing.
func TestTxBatchTablesReadOnlyMemberUnknown(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	s := etagstore.New[Task](h, nil)
	for _, k := range []string{"gone", "kept"} {
		if _, err := s.Create(ctx, k, Task{}); err != nil {
			t.Fatal(err)
		}
	}
	h.loseNext.Store(true)
	var delErr, readErr error
	inOneBatch(t, h, holdTask(t, s, "hold"), func() {
		_, delErr = s.Transact(ctx, func(tx *etagstore.Tx[Task]) error { return tx.Delete("gone") })
	}, func() {
		_, readErr = s.Transact(ctx, func(tx *etagstore.Tx[Task]) error { _, err := tx.Get("kept"); return err })
	})
	t.Logf("deleter: %v; reader: %v", delErr, readErr)
	if errors.Is(readErr, etagstore.ErrOutcomeUnknown) {
		t.Errorf("read-only member: %v; it wrote nothing", readErr)
	}
}

// Transfers and read-only sums through the queue, with lost answers
// (the fault proxy): sums always whole, none unknown for a read.
func TestTxBatchTablesLostAnswers(t *testing.T) {
	ctx := t.Context()
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), storetest.Faults{Seed: 7, DropAfterCommit: 0.2, Unavailable: 0.05})
	b := tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "p"})
	s := etagstore.New[Task](b, nil)
	const accounts, total = 4, 100
	keys := make([]string, accounts)
	for i := range keys {
		keys[i] = fmt.Sprintf("acct%d", i)
		for {
			_, err := s.Upsert(ctx, keys[i], Task{N: total / accounts})
			if err == nil {
				break
			}
		}
	}
	var wg sync.WaitGroup
	var unknown, readUnknown atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := range 12 {
				from, to := keys[(g+i)%accounts], keys[(g+2*i+1)%accounts]
				if from == to {
					continue
				}
				_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
					f, err := tx.Get(from)
					if err != nil {
						return err
					}
					tt, err := tx.Get(to)
					if err != nil {
						return err
					}
					f.N, tt.N = f.N-1, tt.N+1
					return errors.Join(tx.Put(from, f), tx.Put(to, tt))
				})
				switch {
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					unknown.Add(1)
				case err != nil:
					t.Errorf("transfer: %v", err)
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 12 {
				sum := int64(0)
				_, err := s.Transact(ctx, func(tx *etagstore.Tx[Task]) error {
					sum = 0
					for _, k := range keys {
						v, err := tx.Get(k)
						if err != nil {
							return err
						}
						sum += v.N
					}
					return nil
				})
				switch {
				case errors.Is(err, etagstore.ErrOutcomeUnknown):
					readUnknown.Add(1)
				case err != nil:
					t.Errorf("sum: %v", err)
				case sum != total:
					t.Errorf("a read-only sum saw %d, want %d", sum, total)
				}
			}
		})
	}
	wg.Wait()
	sum := int64(0)
	for _, k := range keys {
		v, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		sum += v.Value.N
	}
	if sum != total {
		t.Errorf("final sum %d, want %d", sum, total)
	}
	if readUnknown.Load() > 0 {
		t.Errorf("%d read-only sums got an unknown outcome", readUnknown.Load())
	}
	t.Logf("transfers unknown: %d; faults %v", unknown.Load(), proxy.Counts())
}

// Behind a member that read k, a blind Upsert of k (T alone on its own,
// and after that member serially) keeps the newer type's properties.
func TestTxBatchTablesUpsertBehindRead(t *testing.T) {
	ctx := t.Context()
	h := newHeldTable(t, "p")
	newer := etagstore.New[storetest.Newer](h, nil)
	older := etagstore.New[storetest.Older](h, nil)
	n := storetest.Newer{Title: "k", I8: -8}
	n.Addr.Zip = "69001"
	if _, err := newer.Create(ctx, "k", n); err != nil {
		t.Fatal(err)
	}
	inOneBatch(t, h, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error { return tx.Upsert("hold", storetest.Older{}) }); err != nil {
			t.Errorf("hold: %v", err)
		}
	}, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error { _, err := tx.Get("k"); return err }); err != nil {
			t.Errorf("reader: %v", err)
		}
	}, func() {
		if _, err := older.Transact(ctx, func(tx *etagstore.Tx[storetest.Older]) error { return tx.Upsert("k", storetest.Older{Title: "u"}) }); err != nil {
			t.Errorf("upsert: %v", err)
		}
	})
	got, err := newer.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(storetest.Newer{Title: "u"}, got.Value); diff != "" {
		t.Errorf("a blind Upsert behind a reader: T alone (-want +got):\n%s", diff)
	}
}
