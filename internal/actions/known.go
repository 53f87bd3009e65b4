package actions

import (
	"context"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/access"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/index"
)

// This file is what an unfenced batch of a Store that keeps index entries
// knows before it sends, without reading: the version each action
// replaces, where it is known (startOf), and the unique values it takes,
// predicted free (predictFree). The entries need the version each write
// replaces; a batch reads only the keys whose version it cannot know
// otherwise, and no entry, so that a batch that knows every version sends
// its one transaction and nothing else (issue 44).

// startOf is the base of the first attempt of a batch of acts: each
// action's version as known without reading where it can be, the other
// keys read together (Store.ReadAll: on tables, one query per 14 keys).
//
//   - Create: the key missing. It is sent as a create, so the backend
//     refuses it if the key exists, and that ends the batch with
//     ErrExists (overAll marks it Unread). On a Store whose documents
//     expire it is read: an expired document is replaced on its ETag.
//   - Replace, Delete: the version the ETag names, as the Doc's read
//     holds it (Replace) or the version cache does; with ETagAny, any
//     version the cache holds.
//   - Upsert: the version the cache holds; it is conditioned on it.
//
// Every action is conditioned on the version its entries were built
// from, so a version known but stale (another process wrote the key)
// only refuses the commit: the engine then reads every key and builds
// the batch again over what it read (engine.Based, a base not verified),
// and no entry is ever written from a stale version.
func startOf[T any](ctx context.Context, s Store[T], acts []action[T]) ([]engine.Version, error) {
	base := make([]engine.Version, len(acts))
	var unknown []int
	for i, a := range acts {
		v, ok := knownVersion(ctx, s, a)
		if !ok {
			unknown = append(unknown, i)
			continue
		}
		base[i] = v
	}
	if len(unknown) == 0 {
		return base, nil
	}
	keys := make([]string, len(unknown))
	for j, i := range unknown {
		keys[j] = acts[i].Key
	}
	read, err := s.ReadAll(ctx, keys)
	if err != nil {
		return nil, err
	}
	for j, i := range unknown {
		base[i] = read[j]
	}
	return base, nil
}

// knownVersion is the version a's key holds as known without reading
// (see startOf), if it is known.
func knownVersion[T any](ctx context.Context, s Store[T], a action[T]) (engine.Version, bool) {
	switch a.Kind {
	case access.Create:
		if s.Expires() {
			return engine.Version{}, false
		}
		return engine.Version{Item: driver.Item{Key: a.Key}, MetaKnown: true}, true
	case access.Replace, access.Delete:
		return s.Known(ctx, a.Key, a.ETag, a.Extra)
	case access.Upsert:
		return s.Known(ctx, a.Key, driver.ETagAny, nil)
	}
	return engine.Version{}, false
}

// predictFree makes the first send of req, a batch's request, predict,
// as a group-commit batch does (index.Set.Pending, not wary), that the
// unique values it takes are free: it reads no entry first, unless one
// is a value whose entry its Store wrote lately (most likely held). A
// value held elsewhere refuses the commit, and the entry's refusal is
// learnt as any other's (index.Set.Refused): the write then ends with a
// *UniqueError, or is sent again with the entry known; once refused, a
// send reads the values it takes first. The takers it tells are told
// again by the send (Imply), so they are not kept here.
func predictFree(ctx context.Context, d *engine.Delivery, req engine.Request) {
	engine.PendingOf[*index.UniqueError](ctx, d, req, false)
}
