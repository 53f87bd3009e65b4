package index

import "sync"

// recent is the unique entries a Set wrote lately, by entry key, and the
// document each named: a value whose entry is here is most likely held
// (by that document, or by another since), and one whose entry is not
// most likely free. It is a prediction only, which decides what is read
// before a request is sent, never what is written: the request's
// conditions decide that. It keeps at most maxRecent keys, starting
// afresh when full.
type recent struct {
	mu   sync.Mutex
	keys map[string]string
}

const maxRecent = 1 << 16

// add records key, a unique entry a committed request wrote, naming doc.
func (r *recent) add(key, doc string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil || len(r.keys) >= maxRecent {
		r.keys = map[string]string{}
	}
	r.keys[key] = doc
}

// forget forgets key, an entry a committed request deleted.
func (r *recent) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.keys, key)
}

// has reports whether the Set wrote key's entry lately.
func (r *recent) has(key string) bool {
	_, ok := r.holder(key)
	return ok
}

// holder is the document key's entry named when the Set wrote it lately.
func (r *recent) holder(key string) (doc string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	doc, ok = r.keys[key]
	return doc, ok
}
