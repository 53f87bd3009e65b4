package docstore

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"gocloud.dev/docstore/driver"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/tablestore"
)

// queryPlan is how a query runs: what the backend is asked for, what is
// checked as pages stream in, and whether the results must be sorted.
type queryPlan struct {
	pushed tablestore.Filter // tables: the $filter sent
	npush  int               // how many of the query's filters it holds
	prefix string            // the key prefix listed (not tables)
	upper  string            // the listing ends after this key ("" none)
	sort   bool              // OrderBy needs a sort in memory
	fps    [][]string
	// filters are the query's, with times as the backend stores them
	// (tables: UTC, to 100 ns), so that the $filter and the check in
	// memory compare what is stored with what it can equal.
	filters []driver.Filter
}

func (c *collection) plan(q *driver.Query) queryPlan {
	p := queryPlan{filters: c.storedFilters(q.Filters)}
	for _, f := range p.filters {
		c.planKey(&p, f)
		if c.table == nil {
			continue
		}
		if pk, ok := c.partitionFilter(f); ok {
			p.pushed = p.pushed.And(pk)
			p.npush++
			continue
		}
		if f.FieldPath[0] == c.keyField && len(f.FieldPath) == 1 {
			// The key is the entity's RowKey (a document a Store[T]
			// wrote holds no key property): push it as one, or not at all.
			if rk, ok := c.rowKeyFilter(f); ok {
				p.pushed = p.pushed.And(rk)
				p.npush++
			}
			continue
		}
		if tf, ok := c.pushFilter(f); ok {
			p.pushed = p.pushed.And(tf)
			p.npush++
		}
	}
	if q.OrderByField != "" {
		p.sort = !(q.OrderByField == c.keyField && q.OrderAscending && c.opts.PartitionField == "")
	}
	p.fps = q.FieldPaths
	if len(p.fps) > 0 && c.keyField != "" {
		p.fps = append([][]string{{c.keyField}}, p.fps...)
	}
	return p
}

// partitionFilter is f, an equality on the partition field, as a filter
// on the PartitionKey the field's value is stored under: the service
// reads one partition instead of scanning the table.
func (c *collection) partitionFilter(f driver.Filter) (tablestore.Filter, bool) {
	if c.opts.PartitionField == "" || f.Op != driver.EqualOp || len(f.FieldPath) != 1 || f.FieldPath[0] != c.opts.PartitionField {
		return tablestore.Filter{}, false
	}
	s, ok := f.Value.(string)
	if !ok || s == "" {
		return tablestore.Filter{}, false
	}
	return tablestore.Eq("PartitionKey", s), true
}

// rowKeyFilter is f, a comparison on the key field, as a filter on the
// RowKey the key is stored under: when every document's key is its
// RowKey (a fixed tablestore Partition, or Options.PartitionField), the
// value is a string, and, for an order, one that compares alike by code
// points and by UTF-16 code units (the service's order).
func (c *collection) rowKeyFilter(f driver.Filter) (tablestore.Filter, bool) {
	if c.table.Partition() == "" && c.opts.PartitionField == "" {
		return tablestore.Filter{}, false // keys are "PartitionKey/RowKey"
	}
	s, ok := f.Value.(string)
	if !ok || f.Op != driver.EqualOp && !orderSafe(s) {
		return tablestore.Filter{}, false
	}
	cmp, ok := tableOps[f.Op]
	if !ok {
		return tablestore.Filter{}, false
	}
	return cmp("RowKey", s), true
}

// storedFilters is fs with every time in a value as the backend stores
// it: on tables in UTC, truncated to 100 ns (Edm.DateTime's precision).
func (c *collection) storedFilters(fs []driver.Filter) []driver.Filter {
	if c.table == nil {
		return fs
	}
	out := slices.Clone(fs)
	for i := range out {
		out[i].Value = storedTime(out[i].Value)
	}
	return out
}

func storedTime(v any) any {
	if t, ok := v.(time.Time); ok {
		return t.UTC().Truncate(100 * time.Nanosecond)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.Type().Elem() != timeType && rv.Type().Elem().Kind() != reflect.Interface {
		return v
	}
	vs := make([]any, rv.Len()) // an "in" list: []time.Time, or []any holding times
	for i := range vs {
		vs[i] = storedTime(rv.Index(i).Interface())
	}
	return vs
}

// planKey narrows the listing by a filter on the key field: "=" lists
// that key's prefix (not on tables, whose filter does it), "<" and "<="
// end the listing after the bound. Keys in a partition are not in key
// order, so a collection with Options.PartitionField is not narrowed.
func (c *collection) planKey(p *queryPlan, f driver.Filter) {
	if c.keyField == "" || c.opts.PartitionField != "" || len(f.FieldPath) != 1 || f.FieldPath[0] != c.keyField {
		return
	}
	s, ok := f.Value.(string)
	if !ok || !orderSafe(s) {
		return
	}
	switch f.Op {
	case driver.EqualOp:
		if c.table == nil {
			p.prefix = s
		}
		p.upper = s
	case "<", "<=":
		if p.upper == "" || s < p.upper {
			p.upper = s
		}
	}
}

// orderSafe reports whether every key compares with s alike by code points
// (docstore's order) and by UTF-16 code units (the listing's): s has no
// character from U+D800 on.
func orderSafe(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r >= 0xD800 })
}

// pushFilter is f as a table filter, when the service can check it: "=",
// "<", "<=", ">", ">=" and "in" on a top-level member, with a string,
// boolean (= and in only) or time value. Every filter is also checked in
// memory, so the $filter need only let every match through.
//
// Number filters are not pushed down: a number's property may be an
// Edm.Int32 (a Store[T]'s int32 field), Edm.Int64 or Edm.Double, which is
// not known before reading, and a literal of another type matches nothing
// on Azure's typed comparison, while Azurite answers an Int64 literal on an
// Int32 property with a 500. They are checked in memory as pages stream.
func (c *collection) pushFilter(f driver.Filter) (tablestore.Filter, bool) {
	if len(f.FieldPath) != 1 || f.FieldPath[0] == c.opts.RevisionField || reservedNames[f.FieldPath[0]] || !identifier.MatchString(f.FieldPath[0]) {
		return tablestore.Filter{}, false
	}
	name := f.FieldPath[0]
	var tf tablestore.Filter
	text := false // a string comparison
	if f.Op == "in" {
		rv := reflect.ValueOf(f.Value)
		if rv.Kind() != reflect.Slice || rv.Len() == 0 || rv.Len() > 15 {
			return tablestore.Filter{}, false
		}
		for i := range rv.Len() {
			eq, ok := compareFilter(driver.EqualOp, name, rv.Index(i).Interface())
			if !ok {
				return tablestore.Filter{}, false
			}
			tf, text = orFilter(tf, eq), text || isText(rv.Index(i).Interface())
		}
	} else {
		var ok bool
		if tf, ok = compareFilter(f.Op, name, f.Value); !ok {
			return tablestore.Filter{}, false
		}
		text = isText(f.Value)
	}
	if text && name != c.keyField {
		// A string too large for one property is stored in parts, and the
		// property itself holds their number (see package parts): the
		// documents whose member holds a number are let through, to be
		// checked in memory with the value joined.
		tf = tf.Or(tablestore.Ge(name, int32(0)))
	}
	return tf, true
}

// isText reports whether v encodes as a string.
func isText(v any) bool {
	e, err := encodeValue(v)
	_, ok := e.(string)
	return err == nil && ok
}

func orFilter(f, g tablestore.Filter) tablestore.Filter {
	if f.String() == "" {
		return g
	}
	return f.Or(g)
}

var tableOps = map[string]func(string, any) tablestore.Filter{
	driver.EqualOp: tablestore.Eq, "<": tablestore.Lt, "<=": tablestore.Le, ">": tablestore.Gt, ">=": tablestore.Ge,
}

func compareFilter(op, name string, value any) (tablestore.Filter, bool) {
	cmp, ok := tableOps[op]
	if !ok {
		return tablestore.Filter{}, false
	}
	v, err := encodeValue(value)
	if err != nil {
		return tablestore.Filter{}, false
	}
	switch x := v.(type) {
	case string:
		return cmp(name, x), true
	case bool:
		return cmp(name, x), op == driver.EqualOp
	case time.Time:
		return cmp(name, x), true
	}
	return tablestore.Filter{}, false
}

// RunGetQuery runs q (see the package documentation's Queries and
// QueryPlan). It reads the first page before it returns.
func (c *collection) RunGetQuery(ctx context.Context, q *driver.Query) (driver.DocumentIterator, error) {
	p := c.plan(q)
	if q.BeforeQuery != nil {
		as := func(any) bool { return false }
		if c.table != nil {
			as = driver.AsFunc(p.pushed)
		}
		if err := q.BeforeQuery(as); err != nil {
			return nil, err
		}
	}
	it := &iterator{c: c, q: q, p: p}
	if err := it.start(ctx); err != nil {
		return nil, err
	}
	return it, nil
}

// match is a stored document that passed the filters.
type match struct {
	m    map[string]any
	etag etagstore.ETag
}

// iterator streams a query's matches a page at a time (all of them, or
// the first Offset+Limit, when they must be sorted).
type iterator struct {
	c       *collection
	q       *driver.Query
	p       queryPlan
	token   string
	done    bool // no more pages
	buf     []match
	skipped int
	given   int
	err     error
}

func (it *iterator) start(ctx context.Context) error {
	if err := it.fetch(ctx); err != nil {
		return err
	}
	if !it.p.sort {
		return nil
	}
	keep := 0
	if it.q.Limit > 0 {
		keep = it.q.Offset + it.q.Limit
	}
	for !it.done {
		if err := it.fetch(ctx); err != nil {
			return err
		}
		if keep > 0 && len(it.buf) > 2*keep {
			it.sortBuf()
			it.buf = it.buf[:keep]
		}
	}
	it.sortBuf()
	return nil
}

func (it *iterator) sortBuf() {
	f, asc := it.q.OrderByField, it.q.OrderAscending
	slices.SortStableFunc(it.buf, func(a, b match) int {
		c, ok := compare(a.m[f], b.m[f])
		if !ok {
			return 0
		}
		if asc {
			return c
		}
		return -c
	})
}

// pageSize is how many documents a page asks for: Offset+Limit when every
// filter went to the service and nothing is sorted in memory (on tables,
// $top), otherwise Options.PageSize.
func (it *iterator) pageSize() int {
	n := it.c.opts.PageSize
	if it.q.Limit > 0 && !it.p.sort && it.p.npush == len(it.q.Filters) {
		n = min(n, it.q.Offset+it.q.Limit)
	}
	return n
}

// fetch reads the next page and keeps its matches.
func (it *iterator) fetch(ctx context.Context) error {
	if it.done {
		return nil
	}
	var docs []etagstore.Doc[raw]
	var next string
	var err error
	if it.c.table != nil {
		var pg etagstore.Page[raw]
		pg, err = tablestore.QueryPage(ctx, it.c.store, it.p.pushed, it.pageSize(), it.token)
		docs, next = pg.Docs, pg.Next
	} else {
		var pg etagstore.Page[raw]
		pg, err = it.c.store.Page(ctx, it.p.prefix, it.pageSize(), it.token)
		docs, next = pg.Docs, pg.Next
	}
	if err != nil {
		return err
	}
	it.token, it.done = next, next == ""
	for _, d := range docs {
		if it.p.upper != "" && d.Key > it.p.upper {
			it.done = true
			break
		}
		m, err := it.c.format.unmarshal(d.Value)
		if err != nil {
			return err
		}
		it.c.keyed(m, d.Key)
		if filtersMatch(it.p.filters, m) {
			it.buf = append(it.buf, match{m, d.ETag})
		}
	}
	return nil
}

// keyed sets, in m, a document stored under key, its key field (and
// partition field) when it does not hold them: a document a
// tablestore.Store[T] wrote has its key only as the entity's keys.
func (c *collection) keyed(m map[string]any, key string) {
	if c.keyField == "" {
		return
	}
	if c.opts.PartitionField != "" {
		p, k, ok := strings.Cut(key, "/")
		if !ok {
			return
		}
		if _, has := m[c.opts.PartitionField]; !has {
			m[c.opts.PartitionField] = p
		}
		key = k
	}
	if _, has := m[c.keyField]; !has {
		m[c.keyField] = key
	}
}

// Next decodes the next match into doc, or returns io.EOF.
func (it *iterator) Next(ctx context.Context, doc driver.Document) error {
	for it.err == nil {
		if it.q.Limit > 0 && it.given >= it.q.Limit {
			it.err = io.EOF
			break
		}
		if len(it.buf) == 0 {
			if it.done {
				it.err = io.EOF
				break
			}
			if err := it.fetch(ctx); err != nil {
				it.err = err
			}
			continue
		}
		m := it.buf[0]
		it.buf = it.buf[1:]
		if it.skipped < it.q.Offset {
			it.skipped++
			continue
		}
		it.given++
		return it.c.decodeMap(doc, m.m, m.etag, it.p.fps)
	}
	return it.err
}

// Stop ends the iteration.
func (it *iterator) Stop() { it.err, it.buf = io.EOF, nil }

// As sets nothing.
func (it *iterator) As(any) bool { return false }

// QueryPlan says what the backend is asked for and what is done in memory.
func (c *collection) QueryPlan(q *driver.Query) (string, error) {
	p := c.plan(q)
	it := iterator{c: c, q: q, p: p}
	var parts []string
	switch {
	case c.table != nil && p.pushed.String() != "":
		parts = append(parts, fmt.Sprintf("table query $filter=%s (%d of %d filters)", p.pushed, p.npush, len(q.Filters)))
	case c.table != nil:
		parts = append(parts, "table query without $filter")
	case c.blob:
		parts = append(parts, fmt.Sprintf("list pages of prefix %q and read every document listed (one GET each: a blob query costs a request per document)", p.prefix))
	default:
		parts = append(parts, fmt.Sprintf("list pages of prefix %q", p.prefix))
	}
	if n := it.pageSize(); n < c.opts.PageSize {
		parts = append(parts, fmt.Sprintf("%d per page (Offset+Limit)", n))
	}
	if p.upper != "" {
		parts = append(parts, fmt.Sprintf("ending after key %q", p.upper))
	}
	if len(q.Filters) > 0 {
		parts = append(parts, fmt.Sprintf("every filter checked in memory as pages stream (%d)", len(q.Filters)))
	}
	if p.sort {
		parts = append(parts, "sorted in memory: holds every match (Offset+Limit of them with a Limit)")
	}
	return strings.Join(parts, "; "), nil
}

// asTime is x as a time when other is a time and x a string holding one
// in RFC 3339 (how a Store[T] of JSON documents keeps a time.Time).
func asTime(x, other any) any {
	s, ok := x.(string)
	if _, isTime := other.(time.Time); !ok || !isTime {
		return x
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	return x
}

func filtersMatch(fs []driver.Filter, m map[string]any) bool {
	for _, f := range fs {
		v, ok := getAt(m, f.FieldPath)
		if !ok || !filterMatches(f, v) {
			return false
		}
	}
	return true
}

func filterMatches(f driver.Filter, v any) bool {
	if f.Op == "in" || f.Op == "not-in" {
		rv := reflect.ValueOf(f.Value)
		if rv.Kind() != reflect.Slice {
			return false
		}
		in := false
		for i := range rv.Len() {
			if c, ok := compare(v, rv.Index(i).Interface()); ok && c == 0 {
				in = true
				break
			}
		}
		return in == (f.Op == "in")
	}
	c, ok := compare(v, f.Value)
	if !ok {
		return false
	}
	switch f.Op {
	case driver.EqualOp:
		return c == 0
	case ">":
		return c > 0
	case "<":
		return c < 0
	case ">=":
		return c >= 0
	case "<=":
		return c <= 0
	}
	return false
}

// compare compares a stored value with another (or a filter's value):
// strings, numbers and times by order, booleans by equality.
func compare(x1, x2 any) (int, bool) {
	x1, x2 = asTime(plain(x1), x2), asTime(plain(x2), x1)
	if t1, ok := x1.(time.Time); ok {
		if t2, ok := x2.(time.Time); ok {
			return driver.CompareTimes(t1, t2), true
		}
		return 0, false
	}
	v1, v2 := reflect.ValueOf(x1), reflect.ValueOf(x2)
	if !v1.IsValid() || !v2.IsValid() {
		return 0, false
	}
	if v1.Kind() == reflect.String && v2.Kind() == reflect.String {
		return strings.Compare(v1.String(), v2.String()), true
	}
	if c, err := driver.CompareNumbers(v1, v2); err == nil {
		return c, true
	}
	if v1.Kind() == reflect.Bool && v2.Kind() == reflect.Bool {
		if v1.Bool() == v2.Bool() {
			return 0, true
		}
		return -1, true
	}
	return 0, false
}
