package tablestore

// Index entries (driver.Abilities.Entries): small records the Store
// writes beside its documents, in a document's partition, so that an
// entry commits in the same entity group transaction as its document.
// The entry named name in partition pk is the entity (pk, "\uFFFFe."+name):
// its RowKey starts with U+FFFF, which ValidateKey refuses in a key, so no
// user key equals it, and "e." keeps it apart from the fence records
// ("\uFFFFf." and "\uFFFFh.", tombstone.go). Its key is "pk/\uFFFFe."+name,
// or "\uFFFFe."+name with Options.Partition; its commit scope (Scope) is
// "pk/", or "" with Options.Partition. Read, Write, Delete, Commit and
// CheckCommit accept entry keys; List and ListPage yield entries only for
// a prefix whose row part starts with "\uFFFFe." (one Entries.Key made),
// and nothing else (ReadMany, Query, QueryPage, a listing of any other
// prefix) ever yields one. Names are at most driver.MaxEntryName ASCII
// bytes, so an entry's RowKey is at most 243 UTF-16 units, well inside
// the 1 KiB limit.

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// entryPrefix starts the RowKey of every index entry.
const entryPrefix = recordPrefix + "e."

// entries is Abilities.Entries.
func (b *Backend) entries() *driver.Entries {
	return &driver.Entries{Scope: b.entryScope, Key: entryKey, Range: b.entryRange}
}

// entryRange is Entries.Range: one query of the table (of the partition,
// with Options.Partition) for the RowKeys from entryPrefix+from up to
// entryPrefix+below. Without Options.Partition it names no PartitionKey,
// so the service walks every partition for it and pages the answer (a
// page per 1,000 entities, or per 5 seconds of its time): the client
// reads the entries alone, never a document.
func (b *Backend) entryRange(ctx context.Context, from, below string) iter.Seq2[driver.Item, error] {
	f := Ge("RowKey", entryPrefix+from).And(Lt("RowKey", entryPrefix+below))
	if b.opts.Partition != "" {
		f = Eq("PartitionKey", b.opts.Partition).And(f)
	}
	return b.query(ctx, f, true)
}

// entryScope is Entries.Scope: "pk/" for a key of partition pk, "" with
// Options.Partition. Only the partition is validated: what follows it
// may be an index's value, which may hold any character; an error
// matches etagstore.ErrInvalidKey.
func (b *Backend) entryScope(key string) (string, error) {
	if b.opts.Partition != "" {
		return "", nil
	}
	pk, _, ok := strings.Cut(key, "/")
	if !ok {
		return "", fmt.Errorf("%w: %q: table keys and index values are \"PartitionKey/…\"", etagstore.ErrInvalidKey, key)
	}
	if err := checkKeyPart("partition key", pk); err != nil {
		return "", err
	}
	return pk + "/", nil
}

// entryKey is Entries.Key: the key of the entry named name in scope.
func entryKey(scope, name string) string { return scope + entryPrefix + name }

// isEntryRow reports whether rk is the RowKey of an index entry: the
// prefix and a name of 1 to driver.MaxEntryName letters, digits and
// "._~-".
func isEntryRow(rk string) bool {
	name, ok := strings.CutPrefix(rk, entryPrefix)
	return ok && checkEntryName(name) == nil
}

// checkEntryName reports whether name may name an entry (Entries.Key).
func checkEntryName(name string) error {
	if name == "" || len(name) > driver.MaxEntryName {
		return fmt.Errorf("%w: an index entry's name is 1 to %d bytes, not %d", etagstore.ErrInvalidKey, driver.MaxEntryName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-') {
			return fmt.Errorf("%w: index entry name %q holds %q, not one of the letters, digits and \"._~-\"", etagstore.ErrInvalidKey, name, c)
		}
	}
	return nil
}

// rowOf is the row part of a key or a prefix: what follows the first '/'
// without Options.Partition ("" when there is none), all of it with.
func (b *Backend) rowOf(key string) string {
	if b.opts.Partition != "" {
		return key
	}
	_, rk, _ := strings.Cut(key, "/")
	return rk
}

// entryListing reports whether a listing of prefix is one of index
// entries: its row part starts with entryPrefix, as a prefix
// Entries.Key made does.
func (b *Backend) entryListing(prefix string) bool {
	return strings.HasPrefix(b.rowOf(prefix), entryPrefix)
}

// listed reports whether a listing yields the entity of key: with
// entries (an entry listing), the index entries alone; without, the
// documents alone. Fence records never.
func (b *Backend) listed(key string, entries bool) bool {
	if entries {
		return strings.HasPrefix(b.rowOf(key), entryPrefix)
	}
	return !b.isRecord(key)
}
