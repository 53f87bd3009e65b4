package tablestore

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
)

// ListPage returns up to limit entities whose key starts with prefix and
// comes after the key after in table order (PartitionKey, then RowKey:
// the Backend's declared key order, see order.go), and whether more
// follow; see driver.Backend. It is one query, across partitions too: the
// prefix and the bound are its filter, so a page resumes correctly however
// the table changed; the service's own continuation (NextPartitionKey,
// NextRowKey) is used only within one page, to fill it when the service
// answers with less than asked (at most 1000 entities, or what it found
// within its time limit).
func (b *Backend) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	return b.page(ctx, b.prefixFilter(prefix).And(b.afterFilter(after)), limit, b.entryListing(prefix), nil)
}

// keysOnly is the $select of a listing of keys and ETags alone: the
// service sends every entity's ETag (odata.etag) whatever it selects.
var keysOnly = "PartitionKey,RowKey"

// versionsBetween is driver.Abilities.VersionsBetween: one query of the
// documents in (after, through], bounded by both keys, so that the
// service sorts and sends those alone, selecting the keys; more than a
// service page of them are read page by page.
func (b *Backend) versionsBetween(ctx context.Context, after, through string) ([]driver.Item, error) {
	if through == "" {
		return nil, nil
	}
	f := b.prefixFilter("").And(b.afterFilter(after)).And(b.throughFilter(through))
	items, _, err := b.page(ctx, f, math.MaxInt32, false, &keysOnly)
	for i, it := range items {
		items[i] = driver.Item{Key: it.Key, ETag: it.ETag}
	}
	return items, err
}

// QueryPage is ListPage for the entities matching filter (see Query).
func (b *Backend) QueryPage(ctx context.Context, filter Filter, after string, limit int) ([]driver.Item, bool, error) {
	if b.opts.Partition != "" {
		filter = Eq("PartitionKey", b.opts.Partition).And(filter)
	}
	return b.page(ctx, filter.And(b.afterFilter(after)), limit, false, nil)
}

// QueryPage returns one page of the typed documents of s (a Store on a
// table Backend) matching filter, in table order, as Store.Page does for a
// prefix: limit from 1 to driver.MaxPageLimit, token "" for the first
// page and the previous page's Next after that. A token is bound to the
// filter it was made for. A limit out of range, a token altered or made
// for another filter, a filter that cannot be expressed or that does not
// fit T (a property T does not store, a value of another type: see
// Filter) match etagstore.ErrInvalidInput, and a Store on another backend
// errors.ErrUnsupported; nothing is sent.
// The call is one span (etagstore.QueryPage) of s's telemetry; with
// RecordKeys it records the filter (etagstore.filter).
func QueryPage[T any](ctx context.Context, s *etagstore.Store[T], filter Filter, limit int, token string) (etagstore.Page[T], error) {
	ctx, end := s.Observe(ctx, access.QueryPage, filter.String())
	p, err := queryPage(ctx, s, filter, limit, token)
	end(err)
	return p, err
}

func queryPage[T any](ctx context.Context, s *etagstore.Store[T], filter Filter, limit int, token string) (etagstore.Page[T], error) {
	b, err := tableOf(s, access.QueryPage.String())
	if err != nil {
		return etagstore.Page[T]{}, err
	}
	if err := filter.Err(); err != nil {
		return etagstore.Page[T]{}, fmt.Errorf("%w: %w", etagstore.ErrInvalidInput, err)
	}
	if err := checkFilter(filter, reflect.TypeFor[T](), s.Codec()); err != nil {
		return etagstore.Page[T]{}, err
	}
	return s.PageWith(ctx, "tablestore.query\x00"+filter.String(), limit, token, func(ctx context.Context, after string, limit int) ([]driver.Item, bool, error) {
		return b.QueryPage(ctx, filter, after, limit)
	})
}

// afterFilter matches the keys after key in table order: a greater
// RowKey in key's partition, or a greater PartitionKey. Across partitions
// it is "PartitionKey ge pk and (PartitionKey gt pk or RowKey gt rk)":
// a range on PartitionKey that starts at key's partition, with the rest
// of the condition checked within it, so that the service can seek to
// the start rather than scan the table. "" matches every key.
func (b *Backend) afterFilter(key string) Filter {
	if key == "" {
		return Filter{}
	}
	return b.sideOf(key, Ge, Gt, Gt)
}

// throughFilter matches the keys up to key (inclusive) in table order:
// afterFilter's mirror, "PartitionKey le pk and (PartitionKey lt pk or
// RowKey le rk)" across partitions.
func (b *Backend) throughFilter(key string) Filter {
	return b.sideOf(key, Le, Lt, Le)
}

// sideOf is the filter of the keys on one side of key: within
// Options.Partition, row compares the RowKey; across partitions, reach
// bounds the PartitionKey, past takes every other partition on that side
// and row compares the RowKey in key's partition.
func (b *Backend) sideOf(key string, reach, past, row func(string, any) Filter) Filter {
	if b.opts.Partition != "" {
		return row("RowKey", key)
	}
	pk, rk, ok := strings.Cut(key, "/")
	if !ok {
		return Filter{err: fmt.Errorf("tablestore: %q is not a \"PartitionKey/RowKey\" key", key)}
	}
	return reach("PartitionKey", pk).And(past("PartitionKey", pk).Or(row("RowKey", rk)))
}

// page runs the query filter until it has limit entities and knows whether
// one more exists, asking each request for no more than it still needs.
// With entries it keeps the index entries alone, without them the
// documents alone (see query); sel, when set, is the query's $select.
func (b *Backend) page(ctx context.Context, filter Filter, limit int, entries bool, sel *string) ([]driver.Item, bool, error) {
	if err := filter.Err(); err != nil {
		return nil, false, fmt.Errorf("%w: %w", etagstore.ErrInvalidInput, err)
	}
	f := filter.String()
	var items []driver.Item
	var nextPK, nextRK *string
	for {
		top := int32(min(limit+1-len(items), int(b.opts.PageSize)))
		opts := &aztables.ListEntitiesOptions{Top: &top, NextPartitionKey: nextPK, NextRowKey: nextRK, Select: sel}
		if f != "" {
			opts.Filter = &f
		}
		resp, err := b.client.NewListEntitiesPager(opts).NextPage(ctx)
		if err := driver.Sent(ctx, mapReadError("list", "", err)); err != nil {
			return nil, false, err
		}
		for _, e := range resp.Entities {
			it, err := b.item(e)
			if err != nil {
				return nil, false, err
			}
			if !b.listed(it.Key, entries) {
				continue // a fence record (tombstone.go) or an index entry (entries.go)
			}
			items = append(items, it)
		}
		if len(items) > limit {
			return items[:limit], true, nil
		}
		if empty(resp.NextPartitionKey) && empty(resp.NextRowKey) {
			return items, false, nil
		}
		nextPK, nextRK = resp.NextPartitionKey, resp.NextRowKey
	}
}

func empty(s *string) bool { return s == nil || *s == "" }
