package etaghttp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/etagstore/etagstore"
)

// HandlerOptions configure Handler. Nil means the defaults.
type HandlerOptions struct {
	// MaxBodyBytes bounds request bodies. Default: 1 MiB.
	MaxBodyBytes int64
}

// Problem is an RFC 9457 problem-details body (application/problem+json),
// extended with the conflict's facts.
type Problem struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Detail      string `json:"detail,omitempty"`
	Key         string `json:"key,omitempty"`
	CurrentETag string `json:"currentETag,omitempty"` // as an HTTP entity tag
	Current     any    `json:"current,omitempty"`     // the stored document
	Diff        string `json:"diff,omitempty"`        // (-theirs +mine)
}

// WriteProblem writes p as application/problem+json with status p.Status.
func WriteProblem(w http.ResponseWriter, p Problem) {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// Handler serves the documents of s as JSON at the request path (mount it
// with http.StripPrefix; the remaining path is the key):
//
//   - GET returns the document with its ETag; If-None-Match of the current
//     ETag gives 304 Not Modified.
//   - PUT replaces it: If-Match is required (428 without it; "*" overwrites
//     deliberately); If-None-Match: * creates instead. A stale ETag gives
//     412 with a Problem holding the current ETag, document and diff.
//   - PATCH applies a JSON merge patch (RFC 7396) under the same If-Match
//     rules.
//   - DELETE deletes under the same If-Match rules; 204 on success.
//
// Bodies are limited to MaxBodyBytes (413 beyond). A Handler is safe for
// concurrent use.
func Handler[T any](s *etagstore.Store[T], opts *HandlerOptions) http.Handler {
	h := &handler[T]{s: s, max: 1 << 20}
	if opts != nil && opts.MaxBodyBytes > 0 {
		h.max = opts.MaxBodyBytes
	}
	return h
}

type handler[T any] struct {
	s   *etagstore.Store[T]
	max int64
}

func (h *handler[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	if key == "" {
		WriteProblem(w, Problem{Status: http.StatusNotFound, Detail: "no document key in the path"})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.get(w, r, key)
	case http.MethodPut:
		h.put(w, r, key)
	case http.MethodPatch:
		h.patch(w, r, key)
	case http.MethodDelete:
		h.delete(w, r, key)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, PATCH, DELETE")
		WriteProblem(w, Problem{Status: http.StatusMethodNotAllowed})
	}
}

func (h *handler[T]) get(w http.ResponseWriter, r *http.Request, key string) {
	inm, err := ParseList(r.Header.Get("If-None-Match"))
	if err != nil {
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	d, err := h.s.Get(r.Context(), key)
	if err != nil {
		h.fail(w, key, err)
		return
	}
	w.Header().Set("ETag", FormatETag(d.ETag))
	w.Header().Set("Cache-Control", "no-cache")
	if Matches(inm, d.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeJSON(w, http.StatusOK, d.Value)
}

// ifMatch returns the one ETag of a required If-Match header, or writes
// 428 (missing) or 400 (malformed, or a list).
func ifMatch(w http.ResponseWriter, r *http.Request) (etagstore.ETag, bool) {
	tags, err := ParseList(r.Header.Get("If-Match"))
	switch {
	case err != nil:
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: err.Error()})
		return "", false
	case len(tags) == 0:
		WriteProblem(w, Problem{Status: http.StatusPreconditionRequired,
			Detail: "this write needs If-Match with the ETag you read (or * to overwrite deliberately)"})
		return "", false
	case len(tags) > 1:
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: "If-Match must hold one entity tag"})
		return "", false
	}
	return tags[0], true
}

func (h *handler[T]) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.max))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		WriteProblem(w, Problem{Status: http.StatusRequestEntityTooLarge, Detail: err.Error()})
		return nil, false
	case err != nil:
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: err.Error()})
		return nil, false
	}
	return b, true
}

func (h *handler[T]) decode(w http.ResponseWriter, data []byte) (T, bool) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: "body: " + err.Error()})
		return v, false
	}
	return v, true
}

func (h *handler[T]) put(w http.ResponseWriter, r *http.Request, key string) {
	data, ok := h.body(w, r)
	if !ok {
		return
	}
	v, ok := h.decode(w, data)
	if !ok {
		return
	}
	if inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm == "*" {
		d, err := h.s.Create(r.Context(), key, v)
		if errors.Is(err, etagstore.ErrExists) {
			WriteProblem(w, Problem{Status: http.StatusPreconditionFailed, Key: key, Detail: "the document already exists"})
			return
		}
		h.done(w, key, d, err, http.StatusCreated)
		return
	}
	etag, ok := ifMatch(w, r)
	if !ok {
		return
	}
	d, err := h.s.Replace(r.Context(), etagstore.Doc[T]{Key: key, Value: v, ETag: etag})
	h.done(w, key, d, err, http.StatusOK)
}

func (h *handler[T]) patch(w http.ResponseWriter, r *http.Request, key string) {
	etag, ok := ifMatch(w, r)
	if !ok {
		return
	}
	patch, ok := h.body(w, r)
	if !ok {
		return
	}
	cur, err := h.s.Get(r.Context(), key)
	if err != nil {
		h.fail(w, key, err)
		return
	}
	if etag != etagstore.ETagAny && etag != cur.ETag {
		h.fail(w, key, &etagstore.ConflictError[T]{Key: key, ETag: etag, Theirs: cur, Mine: cur.Value, Attempts: 0})
		return
	}
	doc, err := json.Marshal(cur.Value)
	if err == nil {
		doc, err = MergePatch(doc, patch)
	}
	if err != nil {
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	v, ok := h.decode(w, doc)
	if !ok {
		return
	}
	d, err := h.s.Replace(r.Context(), etagstore.Doc[T]{Key: key, Value: v, ETag: cur.ETag})
	h.done(w, key, d, err, http.StatusOK)
}

func (h *handler[T]) delete(w http.ResponseWriter, r *http.Request, key string) {
	etag, ok := ifMatch(w, r)
	if !ok {
		return
	}
	if err := h.s.Delete(r.Context(), key, etag); err != nil {
		h.fail(w, key, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler[T]) done(w http.ResponseWriter, key string, d etagstore.Doc[T], err error, status int) {
	if err != nil {
		h.fail(w, key, err)
		return
	}
	w.Header().Set("ETag", FormatETag(d.ETag))
	writeJSON(w, status, d.Value)
}

// fail maps a Store error to its HTTP status.
func (h *handler[T]) fail(w http.ResponseWriter, key string, err error) {
	var ce *etagstore.ConflictError[T]
	switch {
	case errors.As(err, &ce):
		WriteProblem(w, Problem{
			Type: "https://etagstore.dev/problems/conflict", Title: "The document changed since you read it",
			Status: http.StatusPreconditionFailed, Key: key, Detail: ce.Error(),
			CurrentETag: FormatETag(ce.Theirs.ETag), Current: ce.Theirs.Value, Diff: ce.Diff(),
		})
	case errors.Is(err, etagstore.ErrConflict):
		WriteProblem(w, Problem{Status: http.StatusPreconditionFailed, Key: key, Detail: err.Error()})
	case errors.Is(err, etagstore.ErrNotFound):
		WriteProblem(w, Problem{Status: http.StatusNotFound, Key: key})
	case errors.Is(err, etagstore.ErrInvalidKey), errors.Is(err, etagstore.ErrInvalidInput):
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Key: key, Detail: err.Error()})
	case errors.Is(err, etagstore.ErrTooLarge):
		WriteProblem(w, Problem{Status: http.StatusRequestEntityTooLarge, Key: key, Detail: err.Error()})
	case errors.Is(err, etagstore.ErrETagRequired):
		WriteProblem(w, Problem{Status: http.StatusPreconditionRequired, Key: key, Detail: err.Error()})
	case errors.Is(err, etagstore.ErrLocked):
		WriteProblem(w, Problem{Status: http.StatusLocked, Key: key, Detail: err.Error()})
	default:
		WriteProblem(w, Problem{Status: http.StatusInternalServerError, Key: key, Detail: "storage error"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// MergePatch applies an RFC 7396 JSON merge patch to doc.
func MergePatch(doc, patch []byte) ([]byte, error) {
	var d, p any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, errors.New("patch: " + err.Error())
	}
	return json.Marshal(mergeValue(d, p))
}

func mergeValue(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergeValue(tm[k], v)
		}
	}
	return tm
}
