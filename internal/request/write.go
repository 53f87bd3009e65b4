package request

import (
	"strconv"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
)

// The key writes plans send: each carries the bookkeeping (write ids,
// lineage, fencing token) the resolver needs.

// Fresh is a write of data under key that starts a new history: a new
// write id and lineage, carrying fence (0: none).
func Fresh(key string, c driver.Cond, data []byte, fence int64) KeyWrite {
	m := meta.Fresh(meta.NewID(), fence)
	return KeyWrite{Action: driver.Action{Key: key, Write: driver.Write{Data: data, Cond: c, Meta: m.String()}}, Meta: m}
}

// Merged is a partial write of data (table properties) under key: it
// carries no bookkeeping, so the stored one is kept.
func Merged(key string, c driver.Cond, data []byte) KeyWrite {
	return KeyWrite{Action: driver.Action{Key: key, Write: driver.Write{Data: data, Cond: c, Mode: driver.ModeMerge}}}
}

// DeleteOf is the delete of key with If-Match etag.
func DeleteOf(key string, etag driver.ETag) KeyWrite {
	return KeyWrite{Action: driver.Action{Key: key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etag)}}}
}

// Check is the check that b is still the version of its key (create-only
// when it was missing, If-Match when it had expired).
func Check(b Version) KeyWrite {
	c := driver.Cond{Kind: driver.CondCreate}
	if b.Stored() { // an expired version is still the key's, read as missing
		c = driver.IfMatch(b.ETag)
	}
	return KeyWrite{Action: driver.Action{Key: b.Key, Check: true, Write: driver.Write{Cond: c}}}
}

// ChecksOnly reports whether req is checks alone: it writes nothing.
func (req Request) ChecksOnly() bool {
	for _, w := range req {
		if !w.Check {
			return false
		}
	}
	return len(req) > 0
}

// Actions are the actions of req.
func (req Request) Actions() []driver.Action {
	out := make([]driver.Action, len(req))
	for i, w := range req {
		out[i] = w.Action
	}
	return out
}

// Written is the version w made, with etag ("" when the backend did not
// say, or for a delete).
func Written(w KeyWrite, etag driver.ETag) driver.Item {
	if w.Delete || w.Write.Mode == driver.ModeMerge {
		return driver.Item{Key: w.Key, ETag: etag} // no whole document to keep
	}
	return driver.Item{Key: w.Key, Data: w.Write.Data, Meta: w.Write.Meta, ETag: etag}
}

// Superseded is the ETag of a state that write made but that was never
// stored as a version of its own: the state member n of a group-commit
// batch left (n < 0: the write's own, found committed with later writes
// after it). It names the write by its id; a write without bookkeeping
// gets a fresh id.
func Superseded(write meta.Meta, n int) driver.ETag {
	id := write.LastID()
	if write.IDs == "" {
		id = meta.NewID()
	}
	if n >= 0 {
		id += "." + strconv.Itoa(n)
	}
	return driver.Superseded(id)
}
