package tablestore_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// trackedTask has a property of every EDM type.
type trackedTask struct {
	Title    string
	Assignee string
	Estimate int64
	Points   int32
	Owner    string `table:"guid"`
	Score    float64
	Due      time.Time
	Done     bool
	Blob     []byte
	Tags     []string // held as JSON in an Edm.String
}

// countingTransport counts the requests the SDK hands to the transport:
// what a packet capture would see.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) Do(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return azuritetest.Transport.Do(req)
}

// newCountedTable creates a fresh table and returns a client for it whose
// requests are counted by the returned transport.
func newCountedTable(t *testing.T) (*aztables.Client, *countingTransport) {
	t.Helper()
	cs := azuritetest.ConnectionString(t)
	svc, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := azuritetest.Name("t")
	if _, err := svc.CreateTable(t.Context(), name, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = svc.DeleteTable(ctx, name, nil)
	})
	ct := &countingTransport{}
	csvc, err := aztables.NewServiceClientFromConnectionString(cs, &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: ct}})
	if err != nil {
		t.Fatal(err)
	}
	return csvc.NewClient(name), ct
}

const ownerGUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

var due = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// queryKeys runs filter through both Query and QueryPage (pages of 2) and
// returns the keys each found, or the first error of each.
func queryKeys[T any](t *testing.T, s *etagstore.Store[T], filter tablestore.Filter) (q, qp []string, qErr, qpErr error) {
	t.Helper()
	ctx := t.Context()
	for d, err := range tablestore.Query(ctx, s, filter) {
		if err != nil {
			qErr = err
			break
		}
		q = append(q, d.Key)
	}
	token := ""
	for {
		p, err := tablestore.QueryPage(ctx, s, filter, 2, token)
		if err != nil {
			qpErr = err
			break
		}
		for _, d := range p.Docs {
			qp = append(qp, d.Key)
		}
		if p.Next == "" {
			break
		}
		token = p.Next
	}
	return q, qp, qErr, qpErr
}

// TestFilterCheckedAgainstT: Query and QueryPage refuse, before sending
// anything, a filter naming a property T does not store or comparing one
// with a value of another EDM type, in every branch of And, Or and Not.
func TestFilterCheckedAgainstT(t *testing.T) {
	client, sent := newCountedTable(t)
	s := tablestore.NewStore[trackedTask](client, nil, nil)
	ptr := tablestore.NewStore[*trackedTask](client, nil, nil)
	ok := tablestore.Eq("Title", "x")
	for _, tc := range []struct {
		name   string
		filter tablestore.Filter
		want   []string // in the error
	}{
		{"typo", tablestore.Eq("Asignee", "ann"), []string{`"Asignee"`, "does not store"}},
		{"string for Int64", tablestore.Eq("Estimate", "3"), []string{`"Estimate"`, "Edm.Int64", "Edm.String"}},
		{"int32 for Int64", tablestore.Eq("Estimate", int32(3)), []string{`"Estimate"`, "Edm.Int64", "Edm.Int32"}},
		// Azurite answers 500 to an Int64 literal on an Int32 property.
		{"int64 for Int32", tablestore.Gt("Points", int64(1)), []string{`"Points"`, "Edm.Int32", "Edm.Int64"}},
		{"int for Int32", tablestore.Eq("Points", 2), []string{`"Points"`, "Edm.Int32", "Edm.Int64"}},
		{"float for Int32", tablestore.Lt("Points", 2.5), []string{`"Points"`, "Edm.Int32", "Edm.Double"}},
		{"string for Guid", tablestore.Eq("Owner", ownerGUID), []string{`"Owner"`, "Edm.Guid", "Edm.String"}},
		{"GUID for String", tablestore.Eq("Title", tablestore.GUID(ownerGUID)), []string{`"Title"`, "Edm.String", "Edm.Guid"}},
		{"int for Double", tablestore.Gt("Score", 1), []string{`"Score"`, "Edm.Double", "Edm.Int64"}},
		{"string for DateTime", tablestore.Gt("Due", "2026-11-26"), []string{`"Due"`, "Edm.DateTime"}},
		{"string for Boolean", tablestore.Eq("Done", "true"), []string{`"Done"`, "Edm.Boolean"}},
		{"string for Binary", tablestore.Eq("Blob", "ab"), []string{`"Blob"`, "Edm.Binary"}},
		{"bool for JSON", tablestore.Eq("Tags", true), []string{`"Tags"`, "Edm.String"}},
		{"int for RowKey", tablestore.Eq("RowKey", 1), []string{`"RowKey"`, "Edm.String"}},
		{"string for Timestamp", tablestore.Gt("Timestamp", "x"), []string{`"Timestamp"`, "Edm.DateTime"}},
		{"bookkeeping", tablestore.Eq(tablestore.MetaProperty, "x"), []string{tablestore.MetaProperty, "does not store"}},
		{"And left", tablestore.Eq("Asignee", "ann").And(ok), []string{`"Asignee"`}},
		{"And right", ok.And(tablestore.Eq("Estimate", "3")), []string{`"Estimate"`}},
		{"Or left", tablestore.Eq("Nope", 1).Or(ok), []string{`"Nope"`}},
		{"Or right", ok.Or(tablestore.Eq("Done", 1)), []string{`"Done"`}},
		{"Not", tablestore.Not(tablestore.Eq("Asignee", "ann")), []string{`"Asignee"`}},
		{"nested", ok.And(tablestore.Not(ok.Or(ok.And(tablestore.Ne("Estimate", "3"))))), []string{`"Estimate"`}},
		{"zero and bad", tablestore.Filter{}.And(tablestore.Eq("Asignee", "ann")), []string{`"Asignee"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := sent.n.Load()
			for name, s := range map[string]interface {
				run(*testing.T, tablestore.Filter) (error, error)
			}{"T": storeRunner[trackedTask]{s}, "*T": storeRunner[*trackedTask]{ptr}} {
				qErr, qpErr := s.run(t, tc.filter)
				for fn, err := range map[string]error{"Query": qErr, "QueryPage": qpErr} {
					if !errors.Is(err, etagstore.ErrInvalidInput) {
						t.Errorf("%s on Store[%s] %s: err = %v, want ErrInvalidInput", fn, name, tc.filter, err)
						continue
					}
					for _, w := range tc.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("%s on Store[%s] %s: err = %q, want it to name %s", fn, name, tc.filter, err, w)
						}
					}
				}
			}
			if n := sent.n.Load() - before; n != 0 {
				t.Errorf("%d requests sent for a refused filter", n)
			}
		})
	}
}

type storeRunner[T any] struct{ s *etagstore.Store[T] }

func (r storeRunner[T]) run(t *testing.T, f tablestore.Filter) (error, error) {
	_, _, qErr, qpErr := queryKeys(t, r.s, f)
	return qErr, qpErr
}

// TestFilterOfRightTypes: filters whose properties and values fit T are
// sent and match, by Query and QueryPage alike.
func TestFilterOfRightTypes(t *testing.T) {
	client, _ := newCountedTable(t)
	s := tablestore.NewStore[trackedTask](client, nil, nil)
	ctx := t.Context()
	docs := map[string]trackedTask{
		"p/a": {Title: "a", Assignee: "ann", Estimate: 3, Points: 2, Owner: ownerGUID, Score: 1.5, Due: due, Done: true, Blob: []byte{0xab}, Tags: []string{"x"}},
		"p/b": {Title: "b", Assignee: "bob", Estimate: 5, Points: 1, Score: 0.5, Due: due.Add(time.Hour)},
		"q/c": {Title: "c", Assignee: "ann", Estimate: 3, Points: 7},
	}
	for k, d := range docs {
		if _, err := s.Create(ctx, k, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		filter tablestore.Filter
		want   []string
	}{
		{tablestore.Eq("Estimate", int64(3)), []string{"p/a", "q/c"}},
		{tablestore.Eq("Estimate", 5), []string{"p/b"}},
		{tablestore.Eq("Points", int32(2)), []string{"p/a"}},
		{tablestore.Gt("Points", int32(1)), []string{"p/a", "q/c"}},
		{tablestore.Eq("Owner", tablestore.GUID(ownerGUID)), []string{"p/a"}},
		{tablestore.Gt("Score", 1.0), []string{"p/a"}},
		{tablestore.Gt("Due", due), []string{"p/b"}},
		{tablestore.Eq("Done", true), []string{"p/a"}},
		{tablestore.Eq("Blob", []byte{0xab}), []string{"p/a"}},
		{tablestore.Eq("Tags", `["x"]`), []string{"p/a"}},
		{tablestore.Eq("PartitionKey", "q"), []string{"q/c"}},
		{tablestore.Ge("RowKey", "b"), []string{"p/b", "q/c"}},
		{tablestore.Gt("Timestamp", time.Now().Add(-time.Hour)), []string{"p/a", "p/b", "q/c"}},
		{tablestore.Eq("Assignee", "ann").And(tablestore.Not(tablestore.Eq("PartitionKey", "q"))).Or(tablestore.Eq("Estimate", int64(5))), []string{"p/a", "p/b"}},
	} {
		q, qp, qErr, qpErr := queryKeys(t, s, tc.filter)
		if qErr != nil || qpErr != nil {
			t.Errorf("%s: Query err %v, QueryPage err %v", tc.filter, qErr, qpErr)
			continue
		}
		if !slices.Equal(q, tc.want) || !slices.Equal(qp, tc.want) {
			t.Errorf("%s: Query %v, QueryPage %v, want %v", tc.filter, q, qp, tc.want)
		}
	}
}

// TestFilterUncheckedForNonStruct: a Store whose T is not a struct keeps
// the filter as it is and sends it.
func TestFilterUncheckedForNonStruct(t *testing.T) {
	client, sent := newCountedTable(t)
	s := etagstore.New[any](tablestore.New(client, nil), nil)
	before := sent.n.Load()
	q, qp, qErr, qpErr := queryKeys(t, s, tablestore.Eq("Asignee", "ann"))
	if qErr != nil || qpErr != nil || len(q) != 0 || len(qp) != 0 {
		t.Errorf("Store[any]: Query %v %v, QueryPage %v %v; want nothing and no error", q, qErr, qp, qpErr)
	}
	if sent.n.Load() == before {
		t.Error("Store[any]: the filter was not sent")
	}
}

// TestFilterComparable: a Filter stays comparable, equal for equal filters.
func TestFilterComparable(t *testing.T) {
	f := func() tablestore.Filter { return tablestore.Eq("A", "a").And(tablestore.Not(tablestore.Gt("N", 1))) }
	if f() != f() {
		t.Error("equal filters compare unequal")
	}
	if f() == tablestore.Eq("A", "a") || (tablestore.Filter{}) != (tablestore.Filter{}).And(tablestore.Filter{}) {
		t.Error("filters compare wrongly")
	}
}
