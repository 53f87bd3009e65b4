package tablestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// TestFenceRecord: a fenced Delete keeps its token in a record entity
// beside the key, which no listing or query returns and no key can name;
// a key too long to prefix gets a hashed record, and the stale create is
// refused all the same; a fenced batch whose deletes and records exceed
// a transaction is refused before anything is sent.
func TestFenceRecord(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	s := tablestore.NewStore[card](client, &tablestore.Options{Partition: "p"}, nil)
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	long := strings.Repeat("k", 511) // 1022 bytes as UTF-16: no room for the record's prefix
	for _, key := range []string{"a", long} {
		if _, err := s.Create(at(3), key, card{Title: key[:1]}); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(at(4), key, etagstore.ETagAny); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(at(3), key, card{Title: "stale"}); !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("stale Create of %.8q… = %v, want ErrFenced", key, err)
		}
	}
	if _, err := s.Create(ctx, "b", card{Title: "b"}); err != nil {
		t.Fatal(err)
	}

	// The records are entities of the partition, and nothing shows them.
	n := 0
	pager := client.NewListEntitiesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Entities)
	}
	if n != 3 {
		t.Errorf("the table holds %d entities, want 3 (b and two fence records)", n)
	}
	var listed []string
	for d, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, d.Key)
	}
	for d, err := range tablestore.Query(ctx, s, tablestore.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, "query:"+d.Key)
	}
	for _, limit := range []int{1, 10} {
		p, err := tablestore.QueryPage(ctx, s, tablestore.Filter{}, limit, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Docs {
			listed = append(listed, "page:"+d.Key)
		}
		if p.Next != "" {
			t.Errorf("QueryPage(limit %d) has a next page after b", limit)
		}
	}
	if got := strings.Join(listed, " "); got != "b query:b page:b page:b" {
		t.Errorf("listed %q, want b alone", got)
	}
	if _, err := s.Get(ctx, "\uFFFFf.a"); !errors.Is(err, etagstore.ErrInvalidKey) {
		t.Errorf("Get of a record's row key = %v, want ErrInvalidKey", err)
	}

	// Fifty-one fenced deletes carry fifty-one records: 102 actions.
	batch := tablestore.NewBatch(s)
	for i := range 51 {
		key := "d" + strings.Repeat("x", i)
		if _, err := s.Create(ctx, key, card{}); err != nil {
			t.Fatal(err)
		}
		batch.Delete(key, etagstore.ETagAny)
	}
	if _, err := batch.Submit(at(5)); !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("a fenced batch of 51 deletes = %v, want ErrInvalidInput (102 actions with their records)", err)
	}
	if _, err := s.Get(ctx, "d"); err != nil {
		t.Errorf("after the refused batch: %v", err)
	}
}

// TestFenceRecordRequests: what keeping the token costs in requests. A
// fenced Delete reads and then sends one transaction (the delete and its
// record), as a fenced delete read before; a fenced Create reads the
// record and sends one transaction, one request more than an unfenced
// Create's one.
func TestFenceRecordRequests(t *testing.T) {
	ctx := t.Context()
	rec := &recorder{}
	s := tablestore.NewStore[card](recordedTable(t, rec), &tablestore.Options{Partition: "p"}, nil)
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	for _, tc := range []struct {
		name string
		op   func() error
		want string
	}{
		{"unfenced Create", func() error { _, err := s.Create(ctx, "u", card{}); return err }, "POST"},
		{"fenced Create", func() error { _, err := s.Create(at(2), "k", card{}); return err }, "GET POST"},
		{"fenced Delete", func() error { return s.Delete(at(3), "k", etagstore.ETagAny) }, "GET POST"},
		{"fenced Create after it", func() error { _, err := s.Create(at(3), "k", card{}); return err }, "GET POST"},
	} {
		rec.take()
		if err := tc.op(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var methods []string
		for _, r := range rec.take() {
			methods = append(methods, r.method)
		}
		if got := strings.Join(methods, " "); got != tc.want {
			t.Errorf("%s sent %q, want %q", tc.name, got, tc.want)
		}
	}
}
