package tablestore_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

type zeroFilterDoc struct {
	A string
	N int64
}

// zeroFilterDocs are ten documents over two partitions; six have A "a".
var zeroFilterDocs = map[string]zeroFilterDoc{
	"p/0": {A: "a", N: 0}, "p/1": {A: "b", N: 1}, "p/2": {A: "a", N: 2},
	"p/3": {A: "a", N: 3}, "p/4": {A: "b", N: 4},
	"q/5": {A: "a", N: 5}, "q/6": {A: "b", N: 6}, "q/7": {A: "a", N: 7},
	"q/8": {A: "b", N: 8}, "q/9": {A: "a", N: 9},
}

// zeroFilterKeys are the keys of zeroFilterDocs whose document keep keeps,
// in table order.
func zeroFilterKeys(keep func(zeroFilterDoc) bool) []string {
	var keys []string
	for k, d := range zeroFilterDocs {
		if keep(d) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // table order: "p/…" < "q/…", one-digit row keys
	return keys
}

// TestFilterZeroRules: the zero Filter matches everything and Not of it
// nothing, through And, Or and Not on either side, on Azurite, through
// Query and QueryPage (pages of 2), over "PartitionKey/RowKey" keys and
// within Options.Partition.
func TestFilterZeroRules(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	s := tablestore.NewStore[zeroFilterDoc](client, nil, nil)
	for k, d := range zeroFilterDocs {
		if _, err := s.Create(ctx, k, d); err != nil {
			t.Fatal(err)
		}
	}
	zero := tablestore.Filter{}
	nothing := tablestore.Not(zero)
	a := tablestore.Eq("A", "a")
	big := tablestore.Gt("N", int64(6))
	all := zeroFilterKeys(func(zeroFilterDoc) bool { return true })
	isA := zeroFilterKeys(func(d zeroFilterDoc) bool { return d.A == "a" })
	notA := zeroFilterKeys(func(d zeroFilterDoc) bool { return d.A != "a" })
	isBig := zeroFilterKeys(func(d zeroFilterDoc) bool { return d.N > 6 })
	aOrBig := zeroFilterKeys(func(d zeroFilterDoc) bool { return d.A == "a" || d.N > 6 })
	if len(all) != 10 || len(isA) != 6 {
		t.Fatalf("fixture: %d documents, %d with A a", len(all), len(isA))
	}
	cases := []struct {
		name   string
		filter tablestore.Filter
		want   []string
	}{
		{"zero", zero, all},
		{"Eq", a, isA},
		{"Not(zero)", nothing, nil},
		{"Not(Not(zero))", tablestore.Not(nothing), all},
		{"Not(Not(Not(zero)))", tablestore.Not(tablestore.Not(nothing)), nil},
		{"Not(Eq)", tablestore.Not(a), notA},
		{"Eq.Or(zero)", a.Or(zero), all},
		{"zero.Or(Eq)", zero.Or(a), all},
		{"zero.Or(zero)", zero.Or(zero), all},
		{"Not(Eq.Or(zero))", tablestore.Not(a.Or(zero)), nil},
		{"Eq.And(zero)", a.And(zero), isA},
		{"zero.And(Eq)", zero.And(a), isA},
		{"zero.And(zero)", zero.And(zero), all},
		{"Not(zero).And(Eq)", nothing.And(a), nil},
		{"Eq.And(Not(zero))", a.And(nothing), nil},
		{"Not(zero).And(zero)", nothing.And(zero), nil},
		{"zero.And(Not(zero))", zero.And(nothing), nil},
		{"Not(zero).Or(Eq)", nothing.Or(a), isA},
		{"Eq.Or(Not(zero))", a.Or(nothing), isA},
		{"Not(zero).Or(zero)", nothing.Or(zero), all},
		{"zero.Or(Not(zero))", zero.Or(nothing), all},
		{"Not(zero).Or(Not(zero))", nothing.Or(nothing), nil},
		{"Not(zero).Or(Eq.Or(Gt))", nothing.Or(a.Or(big)), aOrBig},
		{"Gt.And(Eq.Or(zero))", big.And(a.Or(zero)), isBig},
		{"Gt.Or(Eq.And(Not(zero)))", big.Or(a.And(nothing)), isBig},
		{"Not(Eq).Or(Eq.Or(zero))", tablestore.Not(a).Or(a.Or(zero)), all},
		{"keep everything: Not(zero.Or(Eq))", tablestore.Not(zero.Or(a)), nil},
	}
	for _, tc := range cases {
		q, qp, qErr, qpErr := queryKeys(t, s, tc.filter)
		if qErr != nil || qpErr != nil {
			t.Errorf("%s (%q): Query err %v, QueryPage err %v", tc.name, tc.filter, qErr, qpErr)
			continue
		}
		if !slices.Equal(q, tc.want) || !slices.Equal(qp, tc.want) {
			t.Errorf("%s (%q): Query %v, QueryPage %v, want %v", tc.name, tc.filter, q, qp, tc.want)
		}
	}

	// Within Options.Partition the Backend adds its partition to the
	// filter with And: nothing stays nothing, everything is the partition.
	ps := tablestore.NewStore[zeroFilterDoc](client, &tablestore.Options{Partition: "q"}, nil)
	inQ := func(keys []string) []string {
		var rows []string
		for _, k := range keys {
			if pk, rk, _ := strings.Cut(k, "/"); pk == "q" {
				rows = append(rows, rk)
			}
		}
		return rows
	}
	for _, tc := range cases {
		want := inQ(tc.want)
		q, qp, qErr, qpErr := queryKeys(t, ps, tc.filter)
		if qErr != nil || qpErr != nil {
			t.Errorf("Partition q: %s (%q): Query err %v, QueryPage err %v", tc.name, tc.filter, qErr, qpErr)
			continue
		}
		if !slices.Equal(q, want) || !slices.Equal(qp, want) {
			t.Errorf("Partition q: %s (%q): Query %v, QueryPage %v, want %v", tc.name, tc.filter, q, qp, want)
		}
	}
}

// TestFilterNothingSkipsEmptyPartitionKey: the expression of Not(Filter{})
// excludes an entity whose PartitionKey is the empty string too (which
// the service allows, though a Store does not write one), on Azurite.
func TestFilterNothingSkipsEmptyPartitionKey(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	for _, pk := range []string{"", "p"} {
		if _, err := client.AddEntity(ctx, fmt.Appendf(nil, `{"PartitionKey":%q,"RowKey":"r"}`, pk), nil); err != nil {
			t.Fatalf("add PartitionKey %q: %v", pk, err)
		}
	}
	count := func(f tablestore.Filter) int {
		var opts aztables.ListEntitiesOptions
		if e := f.String(); e != "" {
			opts.Filter = &e
		}
		n := 0
		pager := client.NewListEntitiesPager(&opts)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatalf("%q: %v", f, err)
			}
			n += len(page.Entities)
		}
		return n
	}
	if n := count(tablestore.Filter{}); n != 2 {
		t.Fatalf("no filter: %d entities, want 2", n)
	}
	if n := count(tablestore.Not(tablestore.Filter{})); n != 0 {
		t.Errorf("Not(Filter{}) %q: %d entities, want 0", tablestore.Not(tablestore.Filter{}), n)
	}
}

// TestFilterZeroString: the expressions And, Or and Not make with the zero
// Filter and with Not of it, without a service, and that the filters stay
// comparable and keep their errors and their checks.
func TestFilterZeroString(t *testing.T) {
	zero := tablestore.Filter{}
	nothing := tablestore.Not(zero)
	a := tablestore.Eq("A", "a")
	const none = "PartitionKey lt ''"
	for _, tc := range []struct {
		name string
		f    tablestore.Filter
		want string
	}{
		{"zero", zero, ""},
		{"Not(zero)", nothing, none},
		{"Lt(PartitionKey, \"\")", tablestore.Lt("PartitionKey", ""), none},
		{"Not(Not(zero))", tablestore.Not(nothing), ""},
		{"Not(Not(Not(zero)))", tablestore.Not(tablestore.Not(nothing)), none},
		{"Eq.Or(zero)", a.Or(zero), ""},
		{"zero.Or(Eq)", zero.Or(a), ""},
		{"Not(Eq.Or(zero))", tablestore.Not(a.Or(zero)), none},
		{"Eq.And(zero)", a.And(zero), "A eq 'a'"},
		{"zero.And(Eq)", zero.And(a), "A eq 'a'"},
		{"Not(zero).And(Eq)", nothing.And(a), none},
		{"Eq.And(Not(zero))", a.And(nothing), none},
		{"Not(zero).Or(Eq)", nothing.Or(a), "A eq 'a'"},
		{"Eq.Or(Not(zero))", a.Or(nothing), "A eq 'a'"},
		{"Not(zero).And(zero)", nothing.And(zero), none},
		{"Not(zero).Or(zero)", nothing.Or(zero), ""},
		{"Eq.Or(Not(Eq))", a.Or(tablestore.Not(a)), "(A eq 'a') or (not (A eq 'a'))"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%s: String %q, want %q", tc.name, got, tc.want)
		}
		if tc.f.Err() != nil {
			t.Errorf("%s: Err %v", tc.name, tc.f.Err())
		}
	}

	// Equal filters compare equal; the rules give back the very operand
	// where they say "is f".
	for _, tc := range []struct {
		name string
		got  tablestore.Filter
		want tablestore.Filter
	}{
		{"Not(Not(zero)) == zero", tablestore.Not(nothing), zero},
		{"Not(zero) == Not(zero)", nothing, tablestore.Not(tablestore.Filter{})},
		{"zero.Or(zero) == zero", zero.Or(zero), zero},
		{"Eq.And(zero) == Eq", a.And(zero), a},
		{"zero.And(Eq) == Eq", zero.And(a), a},
		{"Not(zero).Or(Eq) == Eq", nothing.Or(a), a},
		{"Eq.Or(Not(zero)) == Eq", a.Or(nothing), a},
		{"Not(zero).And(zero) == Not(zero)", nothing.And(zero), nothing},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}

	// An error inside a filter wins over the zero Filter and Not of it,
	// on either side, as over any other filter.
	bad := tablestore.Eq("no such", "x")
	if bad.Err() == nil {
		t.Fatal("Eq with a bad property name has no error")
	}
	for name, f := range map[string]tablestore.Filter{
		"Not(bad)":              tablestore.Not(bad),
		"Not(Not(bad))":         tablestore.Not(tablestore.Not(bad)),
		"bad.Or(zero)":          bad.Or(zero),
		"zero.Or(bad)":          zero.Or(bad),
		"bad.And(zero)":         bad.And(zero),
		"zero.And(bad)":         zero.And(bad),
		"Not(zero).And(bad)":    nothing.And(bad),
		"bad.And(Not(zero))":    bad.And(nothing),
		"Not(zero).Or(bad)":     nothing.Or(bad),
		"bad.Or(Not(zero))":     bad.Or(nothing),
		"Eq.Or(zero).And(bad)":  a.Or(zero).And(bad),
		"Not(bad.Or(Eq)).Or(a)": tablestore.Not(bad.Or(a)).Or(a),
	} {
		if !errors.Is(f.Err(), bad.Err()) || f.String() != "" {
			t.Errorf("%s: Err %v, String %q; want %v and \"\"", name, f.Err(), f, bad.Err())
		}
	}
}

// TestFilterZeroStillChecked: a comparison that the zero Filter or Not of
// it makes moot is still checked against T before anything is sent, and
// Not(Filter{}) itself passes the check.
func TestFilterZeroStillChecked(t *testing.T) {
	client, sent := newCountedTable(t)
	s := tablestore.NewStore[zeroFilterDoc](client, nil, nil)
	typo := tablestore.Eq("Aa", "a")
	nothing := tablestore.Not(tablestore.Filter{})
	for name, f := range map[string]tablestore.Filter{
		"typo.Or(zero)":       typo.Or(tablestore.Filter{}),
		"zero.Or(typo)":       tablestore.Filter{}.Or(typo),
		"Not(typo.Or(zero))":  tablestore.Not(typo.Or(tablestore.Filter{})),
		"Not(zero).And(typo)": nothing.And(typo),
		"typo.And(Not(zero))": typo.And(nothing),
		"Not(zero).Or(typo)":  nothing.Or(typo),
	} {
		before := sent.n.Load()
		_, _, qErr, qpErr := queryKeys(t, s, f)
		if !errors.Is(qErr, etagstore.ErrInvalidInput) || !errors.Is(qpErr, etagstore.ErrInvalidInput) {
			t.Errorf("%s: Query err %v, QueryPage err %v; want ErrInvalidInput", name, qErr, qpErr)
		}
		if n := sent.n.Load() - before; n != 0 {
			t.Errorf("%s: %d requests sent", name, n)
		}
	}
	q, qp, qErr, qpErr := queryKeys(t, s, nothing)
	if qErr != nil || qpErr != nil || len(q) != 0 || len(qp) != 0 {
		t.Errorf("Not(zero) on an empty table: Query %v %v, QueryPage %v %v", q, qErr, qp, qpErr)
	}
}
