package memstore

import (
	"context"
	"iter"
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// listChunk is how many items List reads under the lock at a time.
const listChunk = 256

// List yields the items whose key starts with prefix, in key order (by
// UTF-16 code units, as Azure's services order keys). Like the services'
// listings it reads in pages, here of 256 items under the read lock, so
// that the first item comes at once and writers wait for one page at
// most: every key appears at most once and in order, each item as it was
// at one instant, and a document written or deleted while the listing
// runs may or may not be seen. ctx is checked before every page. Keys
// starting with U+FFFF (index entries) are yielded only when prefix
// starts with U+FFFF too (see the package documentation).
func (b *Backend) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		after := ""
		for {
			if err := ctx.Err(); err != nil {
				yield(driver.Item{}, err)
				return
			}
			items, more := b.page(prefix, after, listChunk)
			driver.Sent(ctx, nil)
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if !more {
				return
			}
			after = items[len(items)-1].Key
		}
	}
}

// ListPage returns up to limit items whose key starts with prefix and
// sorts after the key after, in key order (driver.CompareKeys), and
// whether more follow; see driver.Backend. It costs O(log n + limit).
func (b *Backend) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	items, more := b.page(prefix, after, limit)
	driver.Sent(ctx, nil)
	return items, more, nil
}

// versionsBetween is driver.Abilities.VersionsBetween: the documents
// after after and up to through, keys and ETags alone, page by page.
func (b *Backend) versionsBetween(ctx context.Context, after, through string) ([]driver.Item, error) {
	var out []driver.Item
	for through != "" {
		items, more, err := b.ListPage(ctx, "", after, 1000)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if compareKeys(it.Key, through) > 0 {
				return out, nil
			}
			out = append(out, driver.Item{Key: it.Key, ETag: it.ETag})
		}
		if !more {
			break
		}
		after = items[len(items)-1].Key
	}
	return out, nil
}

// page returns, under the read lock, the first limit items whose key
// starts with prefix and sorts after after ("": from the start), and
// whether more follow. The keys with a prefix are contiguous in key order
// and begin at the prefix itself, so the walk starts at the later of
// prefix and after and stops at the first key without the prefix. The
// reserved keys (index entries) are contiguous too: a walk of a prefix
// that is not reserved steps over them at once, to pastReserved, so that
// no listing of a user's prefix yields one or pays for them.
func (b *Backend) page(prefix, after string, limit int) (items []driver.Item, more bool) {
	items = make([]driver.Item, 0, min(limit, 64))
	from := prefix
	if compareKeys(after, prefix) > 0 {
		from = after
	}
	skipReserved := !reserved(prefix)
	b.mu.RLock()
	defer b.mu.RUnlock()
	for { // at most twice: no reserved key sorts at or after pastReserved
		next := ""
		b.keys.AscendGreaterOrEqual(from, func(k string) bool {
			switch {
			case !strings.HasPrefix(k, prefix):
				return false
			case skipReserved && reserved(k):
				next = pastReserved
				return false
			case k == after:
				return true
			case len(items) == limit:
				more = true
				return false
			}
			items = append(items, b.docs[k])
			return true
		})
		if next == "" {
			return items, more
		}
		from = next
	}
}

// pastReserved is the first string after every reserved key in key order
// (compareKeys): U+FFFF's UTF-8 encoding, EF BF BF, with its last byte
// raised. No valid UTF-8 key sorts at or after it (only invalid byte
// strings a caller of the Backend could write).
const pastReserved = "\xEF\xBF\xC0"
