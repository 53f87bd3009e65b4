package tablestore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/storetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Without Options.Partition, keys are "PartitionKey/RowKey" and List and
// Page yield them in the table's order, the order the Backend declares
// (Store.CompareKeys): by PartitionKey, then RowKey. Partition "a" comes
// before "a-b", although "a-b/z" < "a/x" character by character.
func TestKeyOrderAcrossPartitions(t *testing.T) {
	ctx := t.Context()
	s := tablestore.NewStore[Task](azuritetest.NewTable(t), nil, nil)
	keys := []string{"a/x", "a/y", "a b/w", "a-b/z", "a.b/y", "a-b-c/q", "a-/r", "b/1", "a0/s", "k😀/1", "k\uFFFD/1", "a.b.c/t", "a!/u"}
	// The table's order, written out: partitions by UTF-16 code units,
	// then rows.
	tableOrder := []string{"a/x", "a/y", "a b/w", "a!/u", "a-/r", "a-b/z", "a-b-c/q", "a.b/y", "a.b.c/t", "a0/s", "b/1", "k😀/1", "k\uFFFD/1"}
	if sorted := slices.SortedFunc(slices.Values(keys), s.CompareKeys); !slices.Equal(sorted, tableOrder) {
		t.Fatalf("keys sorted by Store.CompareKeys = %+q, want %+q", sorted, tableOrder)
	}
	if slices.IsSortedFunc(tableOrder, driver.CompareKeys) {
		t.Fatal("the keys do not tell the table's order from driver.CompareKeys")
	}
	for _, k := range keys {
		if _, err := s.Create(ctx, k, Task{Title: k}); err != nil {
			t.Fatalf("Create(%q): %v", k, err)
		}
	}
	for _, prefix := range []string{"", "a", "a-", "a.b", "k", "a/"} {
		var want []string
		for _, k := range tableOrder {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		var got []string
		for d, err := range s.List(ctx, prefix) {
			if err != nil {
				t.Fatalf("List(%q): %v", prefix, err)
			}
			got = append(got, d.Key)
		}
		if !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
		for _, limit := range []int{1, 2, 5} {
			var paged []string
			token := ""
			for range len(keys) + 2 {
				p, err := s.Page(ctx, prefix, limit, token)
				if err != nil {
					t.Fatalf("Page(%q, %d): %v", prefix, limit, err)
				}
				for _, d := range p.Docs {
					paged = append(paged, d.Key)
				}
				if token = p.Next; token == "" {
					break
				}
			}
			if !slices.Equal(paged, want) {
				t.Errorf("pages of %d of %q = %q, want %q", limit, prefix, paged, want)
			}
		}
	}
}

// With Options.Partition, keys are row keys and the order is
// driver.CompareKeys, as on every other backend: the Backend declares none.
func TestKeyOrderInOnePartition(t *testing.T) {
	b := tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
	if b.Abilities().CompareKeys != nil {
		t.Error("a tablestore with Options.Partition declares a key order of its own")
	}
	if b := tablestore.New(azuritetest.NewTable(t), nil); b.Abilities().CompareKeys == nil {
		t.Error("a tablestore without Options.Partition declares no key order")
	}
}

// A prefix ending in U+10FFFF selects only the keys that start with it:
// in UTF-16 order U+E000–U+FFFF follow every surrogate pair.
func TestPrefixEndingInTheLastCharacter(t *testing.T) {
	ctx := t.Context()
	for _, opts := range []*tablestore.Options{nil, {Partition: "p"}} {
		s := tablestore.NewStore[Task](azuritetest.NewTable(t), opts, nil)
		keys := []string{"a\U0010FFFF", "a\U0010FFFFz", "a\uE000", "a\uFFFD"}
		if opts == nil {
			for i := range keys {
				keys[i] = "q/" + keys[i]
			}
		}
		for _, k := range keys {
			if _, err := s.Create(ctx, k, Task{}); err != nil {
				t.Fatalf("Create(%+q): %v", k, err)
			}
		}
		prefix := keys[0]
		var got []string
		for d, err := range s.List(ctx, prefix) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d.Key)
		}
		if want := keys[:2]; !slices.Equal(got, want) {
			t.Errorf("List(%+q) = %+q, want %+q", prefix, got, want)
		}
	}
}

// Throttled (503 ServerBusy) merges and batches were refused unapplied:
// a definite answer, never an unknown outcome. Every write is throttled,
// so each is retried until the policy's time runs out: a short one here
// (the default's 15 s would only make the test wait).
func TestThrottledExtrasAreDefinite(t *testing.T) {
	ctx := t.Context()
	proxy := storetest.StartFaultProxy(t, azuritetest.Host(t, "Table"), storetest.Faults{Seed: 1, Unavailable: 1})
	s := tablestore.NewStore[Task](azuritetest.NewTableVia(t, proxy.URL()), &tablestore.Options{Partition: "p"},
		&etagstore.Options{Retry: &etagstore.RetryPolicy{MaxElapsedTime: 300 * time.Millisecond}})
	_, err := tablestore.UpsertMerge(ctx, s, "a", Task{Title: "t"}, "Title")
	if errors.Is(err, etagstore.ErrOutcomeUnknown) || !errors.Is(err, driver.ErrNotApplied) {
		t.Errorf("throttled UpsertMerge = %v, want a definite refusal (driver.ErrNotApplied)", err)
	}
	_, err = tablestore.NewBatch(s).Upsert("b", Task{}).Submit(ctx)
	if errors.Is(err, etagstore.ErrOutcomeUnknown) || !errors.Is(err, driver.ErrNotApplied) {
		t.Errorf("throttled batch = %v, want a definite refusal (driver.ErrNotApplied)", err)
	}
}
