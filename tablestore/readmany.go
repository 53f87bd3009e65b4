package tablestore

import (
	"context"
	"net/url"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore/driver"
)

// readManyKeys is the most keys one ReadMany query asks for: the Table
// service permits at most 15 discrete comparisons in a $filter
// ("Querying tables and entities"), and one is the PartitionKey's.
const readManyKeys = 14

// readManyFilterBytes bounds the URL-escaped $filter of a ReadMany query
// with more than one key, so that its request line stays well inside the
// service's limits (Azurite answers 431 to request headers over 16 KiB). A
// query always asks for at least one key: its two parts are at most 1 KiB
// of UTF-16 each, at most about 9 KiB escaped together.
const readManyFilterBytes = 8 << 10

// readMany is Abilities.ReadMany: one query per partition and up to
// readManyKeys distinct keys,
//
//	PartitionKey eq 'p' and (RowKey eq 'a' or RowKey eq 'b' …)
//
// whose entities become Items as Read makes them (b.item). A key given
// twice is asked for once; a key ValidateKey refuses, unless it is an
// index entry's, fails the call before anything is sent, with its error
// (etagstore.ErrInvalidKey). The
// queries are sent one after the other.
func (b *Backend) readMany(ctx context.Context, keys []string) ([]driver.Item, error) {
	items := make([]driver.Item, len(keys))
	at := make(map[string][]int, len(keys)) // the positions of each key in keys
	var partitions []string                 // in the order keys name them first
	rows := map[string][]string{}           // each partition's distinct row keys
	for i, key := range keys {
		pk, rk, err := b.splitItem(key) // documents' keys and entries' (driver.Entries)
		if err != nil {
			return nil, err
		}
		items[i].Key = key
		if _, seen := at[key]; !seen {
			if _, seen := rows[pk]; !seen {
				partitions = append(partitions, pk)
			}
			rows[pk] = append(rows[pk], rk)
		}
		at[key] = append(at[key], i)
	}
	var qs []rowQuery
	for _, pk := range partitions {
		qs = append(qs, rowQueries(pk, rows[pk])...)
	}
	// The queries go in parallel: each fills the Items of its own keys.
	errs := make([]error, len(qs))
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Go(func() {
			errs[i] = b.readRows(ctx, q, func(it driver.Item) {
				for _, i := range at[it.Key] {
					items[i] = it
				}
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return items, nil
}

// rowQuery is one query of readMany: its filter and how many keys it asks
// for.
type rowQuery struct {
	filter Filter
	keys   int
}

// rowQueries are the queries that read rows of partition pk: each asks
// for up to readManyKeys of them, in order, and for more than one only
// while its escaped filter stays within readManyFilterBytes.
func rowQueries(pk string, rows []string) []rowQuery {
	var qs []rowQuery
	partition := Eq("PartitionKey", pk)
	var q rowQuery
	for _, rk := range rows {
		row := Eq("RowKey", rk)
		if q.keys > 0 && q.keys < readManyKeys {
			if wider := q.filter.Or(row); len(url.QueryEscape(partition.And(wider).String())) <= readManyFilterBytes {
				q = rowQuery{filter: wider, keys: q.keys + 1}
				continue
			}
		}
		if q.keys > 0 {
			qs = append(qs, rowQuery{filter: partition.And(q.filter), keys: q.keys})
		}
		q = rowQuery{filter: row, keys: 1}
	}
	if q.keys > 0 {
		qs = append(qs, rowQuery{filter: partition.And(q.filter), keys: q.keys})
	}
	return qs
}

// readRows sends q and hands each document it finds to found; fence
// records are never documents (tombstone.go), and never asked for. A
// failure is mapped as Read's (mapError).
func (b *Backend) readRows(ctx context.Context, q rowQuery, found func(driver.Item)) error {
	filter, top := q.filter.String(), int32(q.keys)
	pager := b.client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err := driver.Sent(ctx, mapReadError("read many", "", err)); err != nil {
			return err
		}
		for _, e := range page.Entities {
			it, err := b.item(e)
			if err != nil {
				return err
			}
			if !b.isRecord(it.Key) || isEntryRow(b.rowOf(it.Key)) {
				found(it)
			}
		}
	}
	return nil
}
