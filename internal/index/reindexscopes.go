package index

import (
	"context"
)

// This file tells which scopes a Reindex pass must repair at its end.
// The first time the pass meets a scope, before it writes any entry
// there, it asks whether the scope holds any entry of the index (one
// listing of at most one entry). A scope that holds none (a fresh index:
// the usual case) has nothing to repair: every entry that appears in it
// later is one this pass made from a document it read, and its recheck
// keeps it right against declaring writers, or one a declaring writer
// made, right by construction. So the pass neither lists such a scope's
// entries at its end nor remembers the entries it writes there, and its
// memory stays flat. A scope that held entries (an index declared
// before, a pass that failed halfway, a second pass) is repaired as
// before: its entries listed at the end, the documents of those the pass
// did not write or find right read (confirmed.go).

// scopes is what a Reindex pass knows of the scopes it met.
type scopes struct {
	last  string          // the scope met last ("" and !seen before any)
	seen  bool            // whether last is set
	held  map[string]bool // the scopes that held entries when first met
	order []string        // held's scopes, in the order met: Repair's
}

// meet notes that the pass is about to write entries of d in scope,
// asking the backend, the first time, whether scope holds any yet. A
// scope left and met again (not in the backends' key orders, where a
// scope's keys are contiguous) is asked again: it then holds this pass's
// entries, and is repaired, which is slower but right.
func (s *Set) meet(ctx context.Context, d Def, sc *scopes, scope string) error {
	if sc.seen && sc.last == scope {
		return nil
	}
	sc.last, sc.seen = scope, true
	if sc.held[scope] {
		return nil
	}
	items, _, err := s.Backend.ListPage(ctx, s.space.Key(scope, indexPrefix(d)), "", 1)
	if err != nil || len(items) == 0 {
		return err
	}
	if sc.held == nil {
		sc.held = map[string]bool{}
	}
	sc.held[scope] = true
	sc.order = append(sc.order, scope)
	return nil
}
