package engine

import (
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/meta"
)

// This file builds the key writes over a version that carry the
// delivery's fencing token (the others are package request's).

// Over is the write of data over b with the delivery's fencing token:
// create-only when b is missing, If-Match the ETag of an expired b (a new
// history, as a create's), otherwise If-Match b's ETag, continuing
// b's history with a new write id and the higher token (starting a new
// history when b's bookkeeping is not at hand).
func (d *Delivery) Over(b Version, data []byte) KeyWrite {
	var fence int64
	if d.fenced {
		fence = d.fence
	}
	switch {
	case !b.Stored():
		return Fresh(b.Key, driver.Cond{Kind: driver.CondCreate}, data, fence).Replacing(b)
	case !b.Exists || !b.MetaKnown:
		return Fresh(b.Key, driver.IfMatch(b.ETag), data, fence).Replacing(b)
	}
	m := b.Meta.Then("", d.env.KeepIDs, fence)
	return KeyWrite{Action: driver.Action{Key: b.Key, Write: driver.Write{Data: data, Cond: driver.IfMatch(b.ETag), Meta: m.String()}}, Meta: m}.Replacing(b)
}

// DeleteOver is the delete of b, conditioned on its ETag. A fenced
// delivery over a backend that keeps tombstones (driver.ModeTombstone)
// keeps its fencing token (or b's, if higher) beside the key once it is
// gone, so that a create carrying a lower token is refused.
func (d *Delivery) DeleteOver(b Version, tombstones bool) KeyWrite {
	if !d.fenced || !tombstones {
		return DeleteOf(b.Key, b.ETag).Replacing(b)
	}
	m := meta.Fresh(meta.NewID(), max(d.fence, b.Meta.Fence))
	return KeyWrite{Action: driver.Action{Key: b.Key, Delete: true, Write: driver.Write{Cond: driver.IfMatch(b.ETag), Mode: driver.ModeTombstone, Meta: m.String()}}, Meta: m}.Replacing(b)
}
