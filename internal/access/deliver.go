package access

import (
	"context"

	"github.com/etagstore/etagstore/driver"
)

// Kind is what an Action does, in the words of Azure's table operations.
type Kind uint8

const (
	Create      Kind = iota // insert; fails if present
	Replace                 // replace the version ETag names (ETagAny: any)
	Merge                   // merge into the version ETag names (ETagAny: any)
	Upsert                  // insert or replace, unchecked
	UpsertMerge             // insert or merge, unchecked
	Delete                  // delete the version ETag names (ETagAny: any)
)

// Action is one document's part of a Write.
type Action struct {
	Kind Kind
	Key  string
	ETag driver.ETag // Replace, Merge, Delete: the version the caller holds
	// Encode returns the document's encoding (for Merge and UpsertMerge,
	// only the properties to write); nil for Delete. It runs inside the
	// operation's span, after the keys are checked.
	Encode func() ([]byte, error)
	Mine   any // the caller's value (a T), for a *ConflictError
	// Extra is the etagstore.Extra of the Doc a Replace writes back: the
	// members its T does not know, kept.
	Extra any
}

// Write is a write a backend package hands to a Store's engine.
type Write struct {
	Op      string // the operation's name: "Merge", "UpsertMerge" or "Batch"
	Actions []Action
}

// Deliver delivers w through store's engine (store is an
// *etagstore.Store[T]) and returns each action's new ETag ("" where it is
// not known). A refusal of one action of several is a
// *driver.ActionError. Set by package etagstore.
var Deliver func(store any, ctx context.Context, w Write) ([]driver.ETag, error)

// Page is one page of store's documents as Store.Page makes it — limit
// and token checked, the token bound to scope, the items decoded, the next
// token made — from list, which answers as driver.Backend.ListPage does.
// It returns an etagstore.Page[T]. Set by package etagstore.
var Page func(store any, ctx context.Context, scope string, limit int, token string,
	list func(ctx context.Context, after string, limit int) ([]driver.Item, bool, error)) (any, error)

// Decode is it decoded as store's etagstore.Doc[T], with the Store's
// codec and errors. Set by package etagstore.
var Decode func(store any, it driver.Item) (any, error)
