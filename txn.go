package etagstore

import "github.com/etagstore/etagstore/internal/txn"

// Txn is a transaction over Stores that commit together (see Transact).
// Each Store reads and writes in it through its typed view, s.In(tx). It
// is valid during fn and, like fn, not safe for concurrent use; after a
// commit, s.In(tx).ETag(key) reports the new ETag of each document
// written.
type Txn struct {
	h *txn.Handle // the state of fn's current run (package internal/txn)
}

// onHandles is fn as the machinery runs it (internal/txn): on its
// handles, one Txn each. The runs of one call are made one after another,
// on its caller's goroutine.
func onHandles(fn func(*Txn) error) func(*txn.Handle) error {
	var last *Txn
	return func(h *txn.Handle) error {
		if last == nil || last.h != h {
			last = &Txn{h: h}
		}
		return fn(last)
	}
}
