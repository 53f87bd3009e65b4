package cache

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/meta"
)

// This file is the cache as a Store's reads and writes use it: the
// versions a delivery wrote kept, a read answered from a kept copy the
// backend confirms current, a kept version to start a write from.

// Written keeps the versions res wrote. canonical says the one version
// written is exactly T's encoding of its value, so that a write starting
// from the kept copy need not encode it again.
func (c *Cache) Written(res engine.Result, canonical bool) {
	var w Notes
	if canonical && len(res.Out) == 1 {
		w.Canonical = true
		if len(res.Sent) == 1 && res.Out[0].Meta == res.Sent[0].Write.Meta {
			w.Parsed, w.ParsedMeta = true, res.Sent[0].Meta
		}
	}
	for _, it := range res.Out {
		if it.ETag == "" || it.Data == nil {
			c.Drop(it.Key)
			continue
		}
		c.Put(it.Key, it, w)
	}
}

// Fetch reads key from b: from the copy kept when revalidate (the
// backend's ReadIfChanged; nil: none) confirms it current, else from the
// backend, and notes what it read. hit reports the former.
func (c *Cache) Fetch(ctx context.Context, b driver.Backend, revalidate func(ctx context.Context, key string, etag driver.ETag) (driver.Item, bool, error), key string) (it driver.Item, hit bool, err error) {
	if cached, ok := c.Get(key); ok && revalidate != nil {
		it, changed, err := revalidate(ctx, key, cached.ETag)
		switch {
		case err == nil && !changed:
			return cached, true, nil // still current: nothing downloaded
		case err == nil:
			c.Put(key, it, Notes{})
			return it, false, nil
		}
		c.Note(key, it, err)
		return driver.Item{}, false, err
	}
	it, err = b.Read(ctx, key)
	c.Note(key, it, err)
	return it, false, err
}

// Version is the version of key kept for a write to start from (see
// Base), with ETag etag unless etag is empty.
func (c *Cache) Version(key string, clock engine.Clock, etag driver.ETag) (engine.Version, bool) {
	en, ok := c.Base(key, clock)
	if !ok || etag != "" && en.ETag != etag {
		return engine.Version{}, false
	}
	v := engine.Version{Item: en.Item, Exists: true, MetaKnown: true, Canonical: en.Canonical}
	if v.Meta = en.ParsedMeta; !en.Parsed {
		v.Meta = meta.Parse(en.Item.Meta)
	}
	return v, true
}
