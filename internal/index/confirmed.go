package index

import (
	"hash/fnv"

	"github.com/etagstore/etagstore/driver"
)

// This file remembers the entries a Reindex wrote, or found already
// right, in a scope it repairs (one that held entries of the index when
// the pass met it: reindexscopes.go), as they were then (key and ETag),
// so that its repair pass reads the documents of the other entries alone: an entry listed at the
// version this pass confirmed was made from its document as the pass
// read it, and a declaring writer that changed the document since has
// rewritten or deleted the entry in the same commit (a new ETag).

// maxConfirmed bounds how many entries a Reindex remembers (8 bytes and a
// map slot each, about 4 MB for 100,000): past it, the repair pass reads
// the documents of the rest, as it would without.
const maxConfirmed = 1 << 18

// confirmed is a set of entries at a version, by a 64-bit hash of key
// and ETag: a collision (about one in 2^64 per pair) would spare one
// stale entry the repair, which GetBy still checks against its document.
type confirmed map[uint64]struct{}

func confirmedHash(key string, etag driver.ETag) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(etag))
	return h.Sum64()
}

// add remembers key at etag (nothing when etag is unknown, or the set is
// full).
func (c confirmed) add(key string, etag driver.ETag) {
	if etag != "" && len(c) < maxConfirmed {
		c[confirmedHash(key, etag)] = struct{}{}
	}
}

// has reports whether key at etag was confirmed.
func (c confirmed) has(key string, etag driver.ETag) bool {
	_, ok := c[confirmedHash(key, etag)]
	return ok
}
