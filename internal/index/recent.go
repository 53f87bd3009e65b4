package index

import "sync"

// recent is the unique entries a Set wrote lately, by entry key: a value
// whose entry is here is most likely held (by the document that took it,
// or by another since), and one whose entry is not most likely free. It
// is a prediction only, which decides what is read before a request is
// sent, never what is written: the request's conditions decide that. It
// keeps at most maxRecent keys, starting afresh when full.
type recent struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

const maxRecent = 1 << 16

// note records a unique entry p writes, or forgets one it releases, as
// a request carrying it is sent.
func (r *recent) note(p *planned) {
	if !p.def.Unique {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case p.release:
		delete(r.keys, p.action.Key)
	default:
		if r.keys == nil || len(r.keys) >= maxRecent {
			r.keys = map[string]struct{}{}
		}
		r.keys[p.action.Key] = struct{}{}
	}
}

// has reports whether the Set wrote key's entry lately.
func (r *recent) has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.keys[key]
	return ok
}
