package tablestore_test

// Group commit on tables through a proxy that loses answers after the
// commit, answers 503 and resets mid-body (reads too): concurrent Updates
// of a few keys (batched) and transactions with Tx.Create over the same
// keys. Each caller's result must tell the truth about its own mutation:
// success = stored exactly once, *OutcomeUnknownError = at most once, any
// other error = not stored; and a transaction's Create and its write to
// the log land together or not at all.
import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

type faultLog struct{ Log string }

type marker struct{ By string }

func TestGroupCommitUnderFaultsTellsTheTruth(t *testing.T) {
	for _, f := range []storetest.Faults{
		{Seed: 1, DropAfterCommit: 0.3, Unavailable: 0.1, ResetMidBody: 0.1},
		{Seed: 2, DropAfterCommit: 0.3, Unavailable: 0.1, ResetMidBody: 0.1, Reads: true},
	} {
		for _, cancels := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d,reads=%v,cancels=%v", f.Seed, f.Reads, cancels), func(t *testing.T) { groupCommitUnderFaults(t, f, cancels) })
		}
	}
}

func groupCommitUnderFaults(t *testing.T, f storetest.Faults, cancels bool) {
	ctx := t.Context()
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), f)
	b := tablestore.New(azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "p"})
	opts := &etagstore.Options{Retry: &etagstore.RetryPolicy{MaxElapsedTime: 20 * time.Second}}
	s := etagstore.New[faultLog](b, opts)
	marks := etagstore.New[marker](b, opts)
	const keys, writers, each = 3, 18, 8
	type outcome struct {
		key string
		tx  bool
		err error
	}
	var mu sync.Mutex
	outcomes := map[string]outcome{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("k%d", (w+i)%keys)
				id := fmt.Sprintf("w%d.%d", w, i)
				ctx := ctx
				if cancels && (w*7+i)%3 != 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration((w*13+i*7)%9)*time.Millisecond)
					defer cancel()
				}
				var err error
				isTx := (w+i)%3 == 0
				if isTx {
					err = etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
						d, err := s.In(tx).Get(key)
						if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
							return err
						}
						d.Log += "," + id
						if err := s.In(tx).Put(key, d); err != nil {
							return err
						}
						return marks.In(tx).Create("m-"+id, marker{By: id})
					})
				} else {
					_, err = s.Update(ctx, key, func(d *faultLog) error { d.Log += "," + id; return nil }, etagstore.CreateIfMissing())
				}
				mu.Lock()
				outcomes[id] = outcome{key, isTx, err}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	counts := map[string]int{}
	for k := range keys {
		var d etagstore.Doc[faultLog]
		var err error
		for range 50 {
			if d, err = s.Get(context.Background(), fmt.Sprintf("k%d", k)); err == nil || errors.Is(err, etagstore.ErrNotFound) {
				break
			}
		}
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			t.Fatal(err)
		}
		for _, id := range strings.Split(d.Value.Log, ",") {
			if id != "" {
				counts[id]++
			}
		}
	}
	var ok, unknown, failed int
	for id, o := range outcomes {
		n := counts[id]
		if o.tx {
			var err error
			for range 50 {
				if _, err = marks.Get(context.Background(), "m-"+id); err == nil || errors.Is(err, etagstore.ErrNotFound) {
					break
				}
			}
			has := err == nil
			if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
				t.Fatalf("marker %s: %v", id, err)
			}
			if has != (n == 1) {
				t.Errorf("%s: marker stored %v, log holds it %d times (not atomic)", id, has, n)
			}
		}
		switch {
		case o.err == nil:
			ok++
			if n != 1 {
				t.Errorf("%s (tx %v) succeeded on %s, stored %d times", id, o.tx, o.key, n)
			}
		case errors.Is(o.err, etagstore.ErrOutcomeUnknown):
			unknown++
			if n > 1 {
				t.Errorf("%s unknown, stored %d times", id, n)
			}
		case o.err != nil && !cancels && (errors.Is(o.err, context.Canceled) || errors.Is(o.err, context.DeadlineExceeded)):
			t.Errorf("%s: %v", id, o.err)
		default:
			failed++
			if n != 0 {
				t.Errorf("%s (tx %v) failed (%v), but stored %d times", id, o.tx, o.err, n)
			}
		}
	}
	t.Logf("ok %d unknown %d failed %d", ok, unknown, failed)
}
