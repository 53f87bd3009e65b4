package etaghttp

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// The helpers a hand-written handler needs to keep the Handler's rules: a
// write's If-Match read as a storage ETag (428 when it is missing), and a
// lost race answered as the Handler answers it (412 with the current
// document and what changed). Use them where a write is more than one
// document (a DELETE that also updates a count, in one Transact).

// IfMatch returns the storage ETag a write's If-Match names, for
// Store.Replace, Delete or a transaction's check: etagstore.ETagAny for
// "*". A request without If-Match is answered 428 (Precondition Required),
// a malformed one, or one listing several tags, 400; ok is false then and
// nothing else must be written. A tag that names no version (a weak one,
// which If-Match compares strongly, or one the Handler never made) is
// returned as an ETag no version has, so that the write fails as any stale
// one does, with a *etagstore.ConflictError for WriteConflict.
func IfMatch(w http.ResponseWriter, r *http.Request) (etag etagstore.ETag, ok bool) {
	im, err := parseCondition(r.Header, "If-Match")
	switch {
	case err != nil:
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: err.Error(), Key: r.URL.Path})
		return "", false
	case !im.present:
		preconditionRequired(w, r.URL.Path)
		return "", false
	case im.any:
		return etagstore.ETagAny, true
	case len(im.tags) != 1:
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Key: r.URL.Path,
			Detail: fmt.Sprintf("If-Match lists %d entity tags: send the one you read", len(im.tags))})
		return "", false
	}
	t := im.tags[0]
	tag, err := ParseETag(t.opaque)
	if t.weak || errors.Is(err, ErrBadETag) {
		return driver.Superseded("no-such-version"), true
	}
	return tag, true
}

// WriteConflict answers err, a write or delete refused because another
// writer came first, as the Handler does: 412 with an RFC 9457 problem
// holding currentETag, the current document and, for a write, the changes
// between it and what the request would have stored (mine) and their
// diff. The body names the request's path, never the Store's key.
func WriteConflict[T any](w http.ResponseWriter, r *http.Request, err *etagstore.ConflictError[T]) {
	var mine *T
	if r.Method != http.MethodDelete {
		mine = &err.Mine
	}
	writeConflict(w, r.URL.Path, condition{present: true}, err.Theirs, mine, nil)
}
