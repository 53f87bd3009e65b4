package storetest

import (
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// KeySuffix wraps b so that every key is stored with suffix appended, and
// read and listed without it. A tablestore without Options.Partition,
// wrapped with "/r", keeps each key the suite uses (which hold no '/') in
// a partition of its own: RunPaging on it pages across thousands of
// partitions. A prefix must not reach into the suffix. The wrapper's
// declared key order is b's on the stored keys; its other abilities are
// b's, with the keys of Commit, ReadMany and VersionsBetween suffixed too.
func KeySuffix(b driver.Backend, suffix string) driver.Backend {
	return suffixed{Backend: b, suffix: suffix}
}

type suffixed struct {
	driver.Backend
	suffix string
}

func (s suffixed) in(key string) string  { return key + s.suffix }
func (s suffixed) out(key string) string { return strings.TrimSuffix(key, s.suffix) }

func (s suffixed) ValidateKey(key string) error { return s.Backend.ValidateKey(s.in(key)) }

func (s suffixed) Read(ctx context.Context, key string) (driver.Item, error) {
	it, err := s.Backend.Read(ctx, s.in(key))
	it.Key = s.out(it.Key)
	return it, err
}

func (s suffixed) Write(ctx context.Context, key string, w driver.Write) (driver.ETag, error) {
	return s.Backend.Write(ctx, s.in(key), w)
}

func (s suffixed) Delete(ctx context.Context, key string, etag driver.ETag) error {
	return s.Backend.Delete(ctx, s.in(key), etag)
}

// List and ListPage leave out a stored key that starts with prefix only
// with the suffix ("a/r" for prefix "a/"): key "a" does not start with it.
func (s suffixed) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) {
		for it, err := range s.Backend.List(ctx, prefix) {
			if it.Key = s.out(it.Key); err == nil && !strings.HasPrefix(it.Key, prefix) {
				continue
			}
			if !yield(it, err) {
				return
			}
		}
	}
}

func (s suffixed) ListPage(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error) {
	return s.page(ctx, s.Backend.ListPage, prefix, after, limit)
}

// page is a page of list (b's ListPage), its keys without the suffix.
func (s suffixed) page(ctx context.Context, list func(ctx context.Context, prefix, after string, limit int) ([]driver.Item, bool, error), prefix, after string, limit int) ([]driver.Item, bool, error) {
	if after != "" {
		after = s.in(after)
	}
	var page []driver.Item
	for {
		items, more, err := list(ctx, prefix, after, limit-len(page))
		if err != nil {
			return nil, false, err
		}
		for _, it := range items {
			after = it.Key
			if it.Key = s.out(it.Key); strings.HasPrefix(it.Key, prefix) {
				page = append(page, it)
			}
		}
		if !more || len(page) == limit {
			return page, more, nil
		}
	}
}

func (s suffixed) Abilities() driver.Abilities {
	ab := s.Backend.Abilities()
	order := ab.KeyOrder()
	ab.CompareKeys = func(a, b string) int { return order(s.in(a), s.in(b)) }
	if read := ab.ReadIfChanged; read != nil {
		ab.ReadIfChanged = func(ctx context.Context, key string, etag driver.ETag) (driver.Item, bool, error) {
			it, changed, err := read(ctx, s.in(key), etag)
			it.Key = s.out(it.Key)
			return it, changed, err
		}
	}
	if readMany := ab.ReadMany; readMany != nil {
		ab.ReadMany = func(ctx context.Context, keys []string) ([]driver.Item, error) {
			stored := make([]string, len(keys))
			for i, key := range keys {
				stored[i] = s.in(key)
			}
			items, err := readMany(ctx, stored)
			for i := range items {
				items[i].Key = s.out(items[i].Key)
			}
			return items, err
		}
	}
	if between := ab.VersionsBetween; between != nil {
		ab.VersionsBetween = func(ctx context.Context, after, through string) ([]driver.Item, error) {
			if after != "" {
				after = s.in(after)
			}
			if through != "" {
				through = s.in(through)
			}
			items, err := between(ctx, after, through)
			for i := range items {
				items[i].Key = s.out(items[i].Key)
			}
			return items, err
		}
	}
	if commit := ab.Commit; commit != nil {
		ab.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
			return commit(ctx, s.keyed(actions))
		}
	}
	if check := ab.CheckCommit; check != nil {
		ab.CheckCommit = func(actions []driver.Action) error { return check(s.keyed(actions)) }
	}
	return ab
}

func (s suffixed) keyed(actions []driver.Action) []driver.Action {
	out := slices.Clone(actions)
	for i := range out {
		out[i].Key = s.in(out[i].Key)
	}
	return out
}
