package tablestore

import (
	"context"
	"iter"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore/driver"
)

// Key order across partitions. Without Options.Partition a key is
// "PartitionKey/RowKey", and List must yield keys in the order of every
// backend: by the key's UTF-16 code units (driver.CompareKeys). The table
// returns entities by PartitionKey, then RowKey, which is the same order
// but for one case: a partition P and an extension of it by a character
// below '/' (space, '!', '-', '.', …), such as "a" and "a-b". The keys
// "a-b/x" sort before "a/y", while the table returns partition "a" first.
// (Table keys hold no '/', so "P/" never prefixes another partition's keys,
// and the order of keys is the order of "P/" over partitions, then RowKey.)
//
// So listing walks partitions in that order, a partition at a time:
// before a partition come its extensions below '/' (descend), and after a
// partition X comes its nearest pending ancestor A (X extends A by a
// character below '/') unless another partition of A's range precedes it
// (next). Each step is a one-entity query; rows are fetched as before. Within one partition (a prefix holding '/', or Options.Partition)
// the table's order is already the key order.

// spansPartitions reports whether listing prefix crosses partitions.
func (b *Backend) spansPartitions(prefix string) bool {
	return b.opts.Partition == "" && !strings.Contains(prefix, "/")
}

// firstPartition returns the smallest PartitionKey starting with prefix
// that is above lo (at or above it when inclusive) and below hi ("": no
// bound), in the table's order.
func (b *Backend) firstPartition(ctx context.Context, prefix, lo string, inclusive bool, hi string) (string, bool, error) {
	f := prefixRange("PartitionKey", prefix)
	switch {
	case lo != "" && inclusive:
		f = f.And(Ge("PartitionKey", lo))
	case lo != "":
		f = f.And(Gt("PartitionKey", lo))
	}
	if hi != "" {
		f = f.And(Lt("PartitionKey", hi))
	}
	return b.onePartition(ctx, f)
}

// onePartition runs filter for one entity and returns its PartitionKey.
func (b *Backend) onePartition(ctx context.Context, filter Filter) (string, bool, error) {
	fs := filter.String()
	top, sel := int32(1), "PartitionKey"
	var nextPK, nextRK *string
	for {
		opts := &aztables.ListEntitiesOptions{Top: &top, Select: &sel, NextPartitionKey: nextPK, NextRowKey: nextRK}
		if fs != "" {
			opts.Filter = &fs
		}
		resp, err := b.client.NewListEntitiesPager(opts).NextPage(ctx)
		if err != nil {
			return "", false, mapError("list", "", err)
		}
		if len(resp.Entities) > 0 {
			it, err := b.item(resp.Entities[0])
			if err != nil {
				return "", false, err
			}
			pk, _, _ := strings.Cut(it.Key, "/")
			return pk, true, nil
		}
		if empty(resp.NextPartitionKey) && empty(resp.NextRowKey) {
			return "", false, nil
		}
		nextPK, nextRK = resp.NextPartitionKey, resp.NextRowKey
	}
}

// walk is one pass over partitions in key order. pending holds the
// partitions it descended from to reach the current one (each an extension
// of the one before by a character below '/'), nearest last: they come
// after the current partition's range.
type walk struct {
	b       *Backend
	prefix  string
	pending []string
}

// descend returns the first partition, in key order, of p and its
// extensions below '/' (which sort before p), remembering p and the others
// it passes as pending.
func (w *walk) descend(ctx context.Context, p string) (string, error) {
	for {
		q, ok, err := w.b.firstPartition(ctx, w.prefix, p, false, p+"/")
		if err != nil || !ok {
			return p, err
		}
		w.pending = append(w.pending, p)
		p = q
	}
}

// next returns the partition after x in key order: the first partition
// at or after x+"/" (descended into), unless x's nearest pending ancestor
// comes first — when nothing of its range is left.
func (w *walk) next(ctx context.Context, x string) (string, bool, error) {
	after, found, err := w.b.firstPartition(ctx, w.prefix, x+"/", true, "")
	if err != nil {
		return "", false, err
	}
	if n := len(w.pending); n > 0 {
		if anc := w.pending[n-1]; !found || driver.CompareKeys(after, anc+"/") > 0 {
			w.pending = w.pending[:n-1]
			return anc, true, nil
		}
	}
	if !found {
		return "", false, nil
	}
	p, err := w.descend(ctx, after)
	return p, err == nil, err
}

// resume rebuilds pending for a walk that starts after partition x: the
// existing partitions, starting with the prefix, that x extends by a
// character below '/' (one query per candidate; once per page).
func (w *walk) resume(ctx context.Context, x string) error {
	for i := len(w.prefix); i < len(x); i++ {
		if x[i] >= '/' || i == 0 { // the characters below '/' are ASCII: one byte each
			continue
		}
		a := x[:i]
		_, ok, err := w.b.onePartition(ctx, Eq("PartitionKey", a))
		if err != nil {
			return err
		}
		if ok {
			w.pending = append(w.pending, a)
		}
	}
	return nil
}

// listAcross is ListPage across partitions, in key order: two one-entity
// queries per partition besides its rows.
func (b *Backend) listAcross(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	w := &walk{b: b, prefix: prefix}
	var p, rowAfter string
	if after == "" {
		first, ok, err := b.firstPartition(ctx, prefix, "", false, "")
		if err != nil || !ok {
			return nil, false, err
		}
		if p, err = w.descend(ctx, first); err != nil {
			return nil, false, err
		}
	} else {
		p, rowAfter, _ = strings.Cut(after, "/")
		if err := w.resume(ctx, p); err != nil {
			return nil, false, err
		}
	}
	var items []driver.Item
	for {
		f := Eq("PartitionKey", p)
		if rowAfter != "" {
			f = f.And(Gt("RowKey", rowAfter))
		}
		got, more, err := b.page(ctx, f, limit-len(items))
		if err != nil {
			return nil, false, err
		}
		items = append(items, got...)
		if more {
			return items, true, nil
		}
		next, ok, err := w.next(ctx, p)
		if err != nil || !ok {
			return items, false, err
		}
		if len(items) == limit {
			return items, true, nil
		}
		p, rowAfter = next, ""
	}
}

// listAll yields every key starting with prefix, across partitions, in key
// order, a page at a time.
func (b *Backend) listAll(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		after := ""
		for {
			items, more, err := b.listAcross(ctx, prefix, after, int(b.opts.PageSize))
			if err != nil {
				yield(driver.Item{}, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if !more || len(items) == 0 {
				return
			}
			after = items[len(items)-1].Key
		}
	}
}
