package etaghttp

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/etagstore/etagstore"
)

// HandlerOptions configure Handler. Nil means the defaults.
type HandlerOptions[T any] struct {
	// MaxBodyBytes bounds request bodies. Default: 1 MiB.
	MaxBodyBytes int64
	// CheckKey, when set, vets the key of every request before anything is
	// read or written; an error is answered 400 with its text, or as the
	// Error it holds. Default: the Store's own key rules only.
	CheckKey func(key string) error
	// Prepare, when set, is called with each document a PUT or PATCH is
	// about to store and the stored version it replaces (nil when a PUT
	// creates); it may set the fields the server keeps (timestamps,
	// history) and must not change *old. An error is answered 400 with its
	// text, or as the Error it holds (a validation's 422, say), and nothing
	// is written. It may run more than once for one request: under
	// If-Match: * it runs inside Store.Update, and a 412 runs it on the
	// current version to list what the write would change there. Default:
	// none.
	Prepare func(r *http.Request, key string, old, v *T) error
	// Key, when set, maps a request to the key of its document (a route
	// /boards/b1/cards/c7 to "b1.c7", say); "" means the collection, which
	// a GET lists. An error is answered 400 with its text, or as the Error
	// it holds (404 for a route that names nothing, say). A mapped key
	// never appears in a response: problem bodies name the request's path
	// instead. Default: the request path without its leading '/' (mount the
	// Handler with http.StripPrefix).
	Key func(r *http.Request) (string, error)
	// Transact, when set, runs every PUT, PATCH and DELETE inside the
	// app's own transaction, so that the app can write more documents in
	// the same commit, through any Store that commits with the Handler's
	// (a card's delete and its board's count, an audit record, say). It
	// runs the transaction, etagstore.Transact or Store.Transact, calls
	// write in its fn with the Handler's Store's view of the transaction
	// (s.In(tx), or Store.Transact's tx), and returns the transaction's
	// error:
	//
	//	Transact: func(r *http.Request, key string, write func(*etagstore.Tx[Item]) error) error {
	//		return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error {
	//			if err := write(items.In(tx)); err != nil {
	//				return err
	//			}
	//			return audit.In(tx).Put(auditKey(r), entry(r, key)) // the app's own writes
	//		})
	//	},
	//
	// Over the Handler's Store alone, Store.Transact does the same (it is
	// the one-Store case of etagstore.Transact):
	//
	//	Transact: func(r *http.Request, key string, write func(*etagstore.Tx[Item]) error) error {
	//		_, err := items.Transact(r.Context(), func(tx *etagstore.Tx[Item]) error {
	//			if err := write(tx); err != nil {
	//				return err
	//			}
	//			return adjustBoard(tx, r.Method, key) // the app's own writes
	//		})
	//		return err
	//	},
	//
	// The app's writes may come before write or after it, or be left out.
	// write is the Handler's part: it reads key's document in tx, checks
	// If-Match (or If-None-Match: *) against the version tx read, applies
	// the body and Prepare, and puts or deletes it. Its error must be
	// returned from fn: the Handler answers it as it answers its own
	// writes (412 with the current document and the changes, 400 for a
	// body Prepare refused, …), and any other error of the transaction by
	// its sentinel. The app refuses with an Error (a title already taken,
	// 409; an unknown column, 422), returned from fn or from Transact
	// itself: its status, title and detail reach the client, and nothing
	// of the transaction is written. fn may run more than once (the Store
	// reruns it on a conflict), and so may Prepare: fn must call write on
	// every run. After the commit a PUT or PATCH is answered with key's
	// document as the transaction left it and the ETag the commit gave it
	// (tx.ETag after the commit; none where it is Superseded). Transact
	// returning nil without having called write, or a commit that does
	// not hold write's put (fn deleted key after it, or the run that
	// committed did not call write), is the app's mistake: 500, and the
	// Logger says which. Default: none; the Handler writes with the
	// Store's single-document operations.
	Transact func(r *http.Request, key string, write func(tx *etagstore.Tx[T]) error) error
	// Logger, when set, gets one record at level Error for every 5xx
	// answer (a storage failure, or a write whose outcome is unknown), with
	// the request's method, the status and the Store's error: the client
	// sees only "storage error", the operator sees why. The error's text
	// names the key and may quote the storage service's answer, so the
	// record does too, whatever the Store's RecordKeys: give a Logger whose
	// output may hold keys. An answer the app chose (Error) is one record
	// too, at the app's level: Info for a 4xx, Error for a 5xx, with its
	// title and detail. Default: none (nothing is logged).
	Logger *slog.Logger
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
	// Changes lists, for a refused PUT or PATCH, what the write would
	// change in the current version (the one in Current): the members in
	// which the document it would store differs from Current, leaving out
	// those the server sets itself (HandlerOptions.Prepare). A PATCH is
	// applied to Current for this, so only members it names and would set
	// to another value are listed; a PUT replaces the whole document, so
	// a member another writer changed since the client's version, and the
	// PUT's body holds as the client read it, is listed too: the PUT would
	// undo that change. Changes is not what changed since the client's
	// version: the Handler cannot know that version (the storage keeps the
	// current one only, and an entity tag names a version, it does not
	// hold it); a client that keeps the body it read with its ETag diffs
	// Current against it. A refused DELETE has none: it would remove the
	// whole document.
	Changes []Change `json:"changes,omitempty"`
	// Diff is Changes as text, one line per member, its JSON Pointer, the
	// stored value and the value the write would have stored:
	//	/title: "theirs" → "mine"
	// with (none) for a member that is absent, values over 200 bytes cut.
	Diff string `json:"diff,omitempty"`
	// Index, Value and HeldBy name, for a write a unique index refused
	// (409, type ProblemUnique), the index, the value the document would
	// have taken, and the key of the document holding it. HeldBy is left
	// out where it would show a key the client may not see (see Handler).
	Index  string `json:"index,omitempty"`
	Value  string `json:"value,omitempty"`
	HeldBy string `json:"heldBy,omitempty"`
}

// WriteProblem writes p as application/problem+json with status p.Status.
func WriteProblem(w http.ResponseWriter, p Problem) {
	if m, ok := w.(mapped); ok {
		// A mapped key stays the server's: the problem names the path,
		// also where a Store error's text quotes the key.
		if p.Key != "" {
			p.Key = m.path
		}
		if m.key != "" {
			p.Detail = strings.ReplaceAll(p.Detail, strconv.Quote(m.key), strconv.Quote(m.path))
		}
	}
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
// with http.StripPrefix; the remaining path is the key), following RFC 9110
// for conditional requests and RFC 7396 for PATCH:
//
//   - GET returns the document with its ETag; If-None-Match holding the
//     current ETag (weak comparison) or "*" gives 304 Not Modified.
//   - PUT replaces the document. If-Match is required (428 without it)
//     and compared strongly: it holds when it lists the current ETag; a
//     weak tag, a stale one or one this server never issued gives 412 with
//     a Problem holding the current ETag, document and diff. "*" overwrites
//     whatever version is stored. Any If-Match fails (412) on a missing
//     document. If-None-Match: * creates instead (412 if it exists).
//   - PATCH applies a JSON merge patch (RFC 7396) under the same rules:
//     members the patch does not name are kept byte for byte, a null member
//     resets its field to the zero value. With If-Match: * the patch is
//     applied to whatever version is current, re-applied if another write
//     gets there first.
//   - DELETE deletes under the same If-Match rules; 204 on success.
//
// A body must decode into T: a member T has no field for, a null body or
// data after the document is 400, naming what is wrong. A write that may
// or may not have been applied (etagstore.ErrOutcomeUnknown) is 503 with a
// Problem saying so: GET the document to see. A throttled storage service
// (etagstore.ErrUnavailable: nothing was written) is 503 with Retry-After.
// Any other storage failure is 500, "storage error" (a missing table or
// container, or refused credentials, says the storage is not set up:
// never 404 or 412); every 5xx's cause goes to HandlerOptions.Logger. A
// write refused by a unique index of s (a *etagstore.UniqueError: another
// document holds the value) is 409 with a problem of type ProblemUnique
// naming the index, the value and the key of the document holding it
// (heldBy: left out under HandlerOptions.Key, which keeps keys from
// answers, and for a key CheckKey refuses); nothing is written. An
// Error the app returns from its hooks (or from T's UnmarshalJSON) is
// answered with its own status, title and detail. With
// HandlerOptions.Transact the writes run inside the app's transaction
// under the same rules. Every 2xx answer to PUT or PATCH carries the ETag
// of the document it returns. Bodies are limited to MaxBodyBytes (413
// beyond). A Handler is safe for concurrent use.
func Handler[T any](s *etagstore.Store[T], opts *HandlerOptions[T]) http.Handler {
	h := &handler[T]{s: s, max: 1 << 20}
	if opts != nil {
		if opts.MaxBodyBytes > 0 {
			h.max = opts.MaxBodyBytes
		}
		h.checkKey, h.prepare, h.log, h.key, h.transact = opts.CheckKey, opts.Prepare, opts.Logger, opts.Key, opts.Transact
	}
	return h
}

type handler[T any] struct {
	s        *etagstore.Store[T]
	max      int64
	checkKey func(string) error
	prepare  func(r *http.Request, key string, old, v *T) error
	log      *slog.Logger
	key      func(r *http.Request) (string, error)
	transact func(r *http.Request, key string, write func(tx *etagstore.Tx[T]) error) error
}

// mapped is the ResponseWriter of a request whose key HandlerOptions.Key
// mapped: the problems written to it name path, the request's path.
type mapped struct {
	http.ResponseWriter
	path, key string
}

// serverError writes p, a 5xx answer, and logs err, its cause, at the
// operator's Logger.
func (h *handler[T]) serverError(w http.ResponseWriter, r *http.Request, p Problem, err error) {
	if h.log != nil {
		h.log.ErrorContext(r.Context(), "etaghttp: "+http.StatusText(p.Status),
			slog.String("method", r.Method), slog.Int("status", p.Status), slog.Any("err", err))
	}
	WriteProblem(w, p)
}

func (h *handler[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	if h.key != nil {
		var err error
		if key, err = h.key(r); err != nil {
			h.refuse(w, r, r.URL.Path, err)
			return
		}
		w = mapped{ResponseWriter: w, path: r.URL.Path, key: key}
	}
	if key == "" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			WriteProblem(w, Problem{Status: http.StatusMethodNotAllowed, Detail: "the collection can only be listed"})
			return
		}
		h.list(w, r)
		return
	}
	if h.checkKey != nil {
		if err := h.checkKey(key); err != nil {
			h.refuse(w, r, key, err)
			return
		}
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
	inm, err := parseCondition(r.Header, "If-None-Match")
	if err != nil {
		badRequest(w, key, err)
		return
	}
	im, err := parseCondition(r.Header, "If-Match")
	if err != nil {
		badRequest(w, key, err)
		return
	}
	d, err := h.s.Get(r.Context(), key)
	if misconfigured(err) != "" {
		h.fail(w, r, key, err)
		return
	}
	if im.present && (err != nil && errors.Is(err, etagstore.ErrNotFound) || err == nil && !im.matchStrong(d.ETag)) {
		// RFC 9110 §13.1.1: a GET with an If-Match that does not match
		// (or of a missing document) is 412.
		WriteProblem(w, Problem{Status: http.StatusPreconditionFailed, Key: key, Detail: "If-Match does not match the current version"})
		return
	}
	if err != nil {
		h.fail(w, r, key, err)
		return
	}
	w.Header().Set("ETag", FormatETag(d.ETag))
	w.Header().Set("Cache-Control", "no-cache")
	if inm.matchWeak(d.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeJSON(w, http.StatusOK, d.Value)
}

// conditions parses a write's If-Match and If-None-Match, or writes 400.
// A write takes If-None-Match only as "*" (create), and only on PUT.
func conditions(w http.ResponseWriter, r *http.Request, key string) (im, inm condition, ok bool) {
	im, err := parseCondition(r.Header, "If-Match")
	if err == nil {
		inm, err = parseCondition(r.Header, "If-None-Match")
	}
	switch {
	case err != nil:
		badRequest(w, key, err)
		return im, inm, false
	case inm.present && (!inm.any || r.Method != http.MethodPut || im.present):
		badRequest(w, key, errors.New("a write takes If-None-Match only as * on a PUT without If-Match (create)"))
		return im, inm, false
	}
	return im, inm, true
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

func (h *handler[T]) put(w http.ResponseWriter, r *http.Request, key string) {
	im, inm, ok := conditions(w, r, key)
	if !ok {
		return
	}
	data, ok := h.body(w, r)
	if !ok {
		return
	}
	v, err := decodeStrict[T](data)
	if err != nil {
		h.refuse(w, r, key, fmt.Errorf("body: %w", err))
		return
	}
	switch {
	case h.transact != nil:
		h.inTx(w, r, key, im, inm.any, func(T) (T, error) { return v, nil })
	case inm.any:
		h.create(w, r, key, v)
	default:
		h.write(w, r, key, im, func(T) (T, error) { return v, nil })
	}
}

func (h *handler[T]) patch(w http.ResponseWriter, r *http.Request, key string) {
	im, _, ok := conditions(w, r, key)
	if !ok {
		return
	}
	patch, ok := h.body(w, r)
	if !ok {
		return
	}
	if !json.Valid(patch) {
		badRequest(w, key, errors.New("patch: invalid JSON"))
		return
	}
	change := func(cur T) (T, error) { return patched(cur, patch) }
	if h.transact != nil {
		h.inTx(w, r, key, im, false, change)
		return
	}
	h.write(w, r, key, im, change)
}

func (h *handler[T]) create(w http.ResponseWriter, r *http.Request, key string, v T) {
	if err := h.prepared(r, key, nil, &v); err != nil {
		h.fail(w, r, key, err)
		return
	}
	d, err := h.s.Create(r.Context(), key, v)
	switch {
	case h.answerApp(w, r, key, err):
		// An error that names its own answer (see appAnswer), before the
		// sentinels it may match (ErrExists).
	case errors.Is(err, etagstore.ErrExists):
		WriteProblem(w, Problem{Status: http.StatusPreconditionFailed, Key: key,
			Detail: "If-None-Match: * failed: a document with this key already exists. GET it, and send If-Match with its ETag to replace it"})
	case errors.Is(err, etagstore.ErrNotFound):
		// A create finds nothing in its way by definition: not found here is
		// the store's table or container, missing. Not the client's doing.
		h.serverError(w, r, Problem{Status: http.StatusInternalServerError, Key: key, Detail: cmp.Or(misconfigured(err), "storage error")}, err)
	default:
		h.written(w, r, key, d, err, http.StatusCreated)
	}
}

// write stores change(current) under key if If-Match im holds. With "*",
// through Store.Update: the change is applied to whatever version is
// current, and again if another write gets there first. With tags, the
// current version is read and compared strongly, and written with If-Match
// of the version compared, so a write in between is a 412 too.
func (h *handler[T]) write(w http.ResponseWriter, r *http.Request, key string, im condition, change func(T) (T, error)) {
	if !im.present {
		preconditionRequired(w, key)
		return
	}
	ctx := r.Context()
	if im.any {
		d, err := h.s.Update(ctx, key, func(p *T) error {
			v, _, err := h.next(r, key, p, change)
			*p = v
			return err
		})
		h.written(w, r, key, d, err, http.StatusOK)
		return
	}
	cur, err := h.s.Get(ctx, key)
	if err != nil {
		h.failWrite(w, r, key, err)
		return
	}
	v, skip, err := h.next(r, key, &cur.Value, change)
	switch {
	case !im.matchStrong(cur.ETag):
		h.conflict(w, key, im, cur, &v, skip)
		return
	case err != nil:
		h.fail(w, r, key, err)
		return
	}
	// cur.Extra: the members the server's T does not know are kept; a PUT
	// replaces the representation this handler serves, not what it cannot see.
	d, err := h.s.Replace(ctx, etagstore.Doc[T]{Key: key, Value: v, ETag: cur.ETag, Extra: cur.Extra})
	var ce *etagstore.ConflictError[T]
	if errors.As(err, &ce) {
		// Written in between: the changes are what this write would do to
		// the new version, so a PATCH is applied to it again (applied to
		// the version read, it would seem to undo the write in between).
		if mine, again, err := h.next(r, key, &ce.Theirs.Value, change); err == nil {
			ce.Mine, skip = mine, again
		}
		h.conflict(w, key, im, ce.Theirs, &ce.Mine, skip)
		return
	}
	h.written(w, r, key, d, err, http.StatusOK)
}

// next is the document a write stores over old: change(old), prepared.
// On an error it returns old (what a conflict's diff then shows). skip
// lists the JSON Pointers of the members Prepare changed: the server's own.
func (h *handler[T]) next(r *http.Request, key string, old *T, change func(T) (T, error)) (v T, skip []string, err error) {
	v, err = change(*old)
	if err == nil && h.prepare != nil {
		raw := v
		if err = h.prepared(r, key, old, &v); err == nil {
			for _, c := range changes(raw, v, nil) {
				skip = append(skip, c.Path)
			}
		}
	}
	if err != nil {
		return *old, nil, invalid{err}
	}
	return v, skip, nil
}

func (h *handler[T]) prepared(r *http.Request, key string, old, v *T) error {
	if h.prepare == nil {
		return nil
	}
	if err := h.prepare(r, key, old, v); err != nil {
		return invalid{err}
	}
	return nil
}

func (h *handler[T]) delete(w http.ResponseWriter, r *http.Request, key string) {
	im, _, ok := conditions(w, r, key)
	switch {
	case !ok:
		return
	case !im.present:
		preconditionRequired(w, key)
		return
	case h.transact != nil:
		h.inTx(w, r, key, im, false, nil)
		return
	}
	held := etagstore.ETagAny
	if !im.any {
		cur, err := h.s.Get(r.Context(), key)
		if err != nil {
			h.failWrite(w, r, key, err)
			return
		}
		if !im.matchStrong(cur.ETag) {
			h.conflict(w, key, im, cur, nil, nil)
			return
		}
		held = cur.ETag
	}
	if err := h.s.Delete(r.Context(), key, held); err != nil {
		if ce := (*etagstore.ConflictError[T])(nil); errors.As(err, &ce) {
			h.conflict(w, key, im, ce.Theirs, nil, nil)
			return
		}
		h.failWrite(w, r, key, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// written answers a write that returned d and err with status, the
// document and its ETag.
func (h *handler[T]) written(w http.ResponseWriter, r *http.Request, key string, d etagstore.Doc[T], err error, status int) {
	if err != nil {
		h.failWrite(w, r, key, err)
		return
	}
	// A write whose state was never stored as a version of its own (a
	// PATCH committed with later ones in one group-commit batch, or a write
	// whose lost response was found committed with later writes after it)
	// has a superseded ETag, which no condition can ever match: the answer
	// carries no ETag then, and the client GETs the resource for the
	// current version and its ETag before its next conditional write.
	if !d.ETag.Superseded() {
		w.Header().Set("ETag", FormatETag(d.ETag))
	}
	writeJSON(w, status, d.Value)
}

// invalid marks a write refused because of what the request sent (400).
type invalid struct{ err error }

func (e invalid) Error() string { return e.err.Error() }
func (e invalid) Unwrap() error { return e.err }

// refuse answers err, an error of what the request sent or of the app's
// hook that vets it: 400 with its text, unless err holds the app's own
// answer (Error).
func (h *handler[T]) refuse(w http.ResponseWriter, r *http.Request, key string, err error) {
	if !h.answerApp(w, r, key, err) {
		badRequest(w, key, err)
	}
}

func badRequest(w http.ResponseWriter, key string, err error) {
	WriteProblem(w, Problem{Status: http.StatusBadRequest, Key: key, Detail: err.Error()})
}

func preconditionRequired(w http.ResponseWriter, key string) {
	WriteProblem(w, Problem{Status: http.StatusPreconditionRequired, Key: key,
		Detail: "this write needs If-Match with the ETag you read (or * to overwrite deliberately)"})
}

// failWrite answers a conditional write's error: a missing document fails
// every If-Match, "*" included (RFC 9110 §13.1.1), so it is 412.
func (h *handler[T]) failWrite(w http.ResponseWriter, r *http.Request, key string, err error) {
	if h.answerApp(w, r, key, err) {
		return
	}
	if errors.Is(err, etagstore.ErrNotFound) && misconfigured(err) == "" {
		WriteProblem(w, Problem{Type: "https://etagstore.dev/problems/conflict", Title: "The document does not exist",
			Status: http.StatusPreconditionFailed, Key: key,
			Detail: "If-Match failed: there is no current version (the document was deleted, or never created); create it with PUT and If-None-Match: *"})
		return
	}
	h.fail(w, r, key, err)
}

// conflict answers a write whose If-Match does not hold the current
// version theirs; mine is what the write would have stored (nil for a
// DELETE) and skip the members the server sets, left out of the diff.
func (h *handler[T]) conflict(w http.ResponseWriter, key string, im condition, theirs etagstore.Doc[T], mine *T, skip []string) {
	writeConflict(w, key, im, theirs, mine, skip)
}

// writeConflict writes conflict's answer, naming the resource name.
func writeConflict[T any](w http.ResponseWriter, name string, im condition, theirs etagstore.Doc[T], mine *T, skip []string) {
	tag := FormatETag(theirs.ETag)
	detail := fmt.Sprintf("If-Match failed: the document changed since the version you name. Its current entity tag is %s: GET it (or take this body's current document), apply your change to it and send If-Match: %s", tag, tag)
	if mine == nil {
		detail = fmt.Sprintf("If-Match failed: the document changed since the version you name, so it was not deleted. Its current entity tag is %s: look at this body's current document and, to delete it, send If-Match: %s", tag, tag)
	}
	if im.weakOnly() {
		detail = fmt.Sprintf("If-Match failed: it compares entity tags strongly (RFC 9110 §13.1.1), so a weak tag (W/...) never matches. The current entity tag is %s", tag)
	}
	var cs []Change
	if mine != nil {
		cs = changes(theirs.Value, *mine, skip)
	}
	WriteProblem(w, Problem{
		Type: "https://etagstore.dev/problems/conflict", Title: "The document changed since you read it",
		Status: http.StatusPreconditionFailed, Key: name, Detail: detail,
		CurrentETag: tag, Current: theirs.Value, Changes: cs, Diff: diffText(cs),
	})
}

// fail maps a Store error to its HTTP status; an answer the app chose
// (Error) comes first. Its texts name HTTP entity tags only, never storage
// ETags.
func (h *handler[T]) fail(w http.ResponseWriter, r *http.Request, key string, err error) {
	var (
		ce  *etagstore.ConflictError[T]
		bad invalid
	)
	switch {
	case h.answerApp(w, r, key, err):
		// The app's own answer (Error).
	case misconfigured(err) != "":
		h.serverError(w, r, Problem{Status: http.StatusInternalServerError, Key: key, Detail: misconfigured(err)}, err)
	case errors.As(err, &bad):
		badRequest(w, key, bad.err)
	case errors.Is(err, etagstore.ErrOutcomeUnknown):
		h.serverError(w, r, Problem{
			Type: "https://etagstore.dev/problems/outcome-unknown", Title: "The write may have been applied",
			Status: http.StatusServiceUnavailable, Key: key,
			Detail: "the storage service's answer was lost: the write may have been applied, or not. GET the resource to check before you send it again",
		}, err)
	case errors.As(err, &ce):
		h.conflict(w, key, condition{}, ce.Theirs, &ce.Mine, nil)
	case errors.Is(err, etagstore.ErrConflict):
		WriteProblem(w, Problem{Status: http.StatusPreconditionFailed, Key: key, Detail: "the document changed since you read it: GET it and try again"})
	case errors.Is(err, etagstore.ErrNotFound):
		WriteProblem(w, Problem{Status: http.StatusNotFound, Key: key, Detail: "no document has this key"})
	case errors.Is(err, etagstore.ErrInvalidKey), errors.Is(err, etagstore.ErrInvalidInput):
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Key: key, Detail: err.Error()})
	case errors.Is(err, etagstore.ErrTooLarge):
		WriteProblem(w, Problem{Status: http.StatusRequestEntityTooLarge, Key: key, Detail: err.Error()})
	case errors.Is(err, etagstore.ErrETagRequired):
		preconditionRequired(w, key)
	case errors.Is(err, etagstore.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		h.serverError(w, r, Problem{Status: http.StatusServiceUnavailable, Key: key,
			Detail: "the storage service is busy (throttling) and nothing was written: try again shortly"}, err)
	case errors.Is(err, etagstore.ErrLocked):
		WriteProblem(w, Problem{Status: http.StatusLocked, Key: key, Detail: "the document is locked by another writer"})
	default:
		h.serverError(w, r, Problem{Status: http.StatusInternalServerError, Key: key, Detail: "storage error"}, err)
	}
}

// misconfigured says what is wrong with the server's storage setup when
// err shows it (etagstore.ErrStorageNotFound: the table or container does
// not exist; or Azure refused the credentials), and "" otherwise. Such an
// error is the operator's to fix, never a missing document or a failed
// precondition.
func misconfigured(err error) string {
	if errors.Is(err, etagstore.ErrStorageNotFound) {
		return "storage error: the server's storage is not set up (its table or container does not exist)"
	}
	var re *azcore.ResponseError
	if err == nil || !errors.As(err, &re) {
		return ""
	}
	switch re.ErrorCode {
	case "AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch", "InsufficientAccountPermissions":
		return "storage error: the server's storage refused its credentials"
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Listing limits of a collection GET.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// list serves GET on the collection: one page of documents in key order,
// as {"documents": [{"key", "etag", "value"}], "next": "?…"}. ?limit= sets
// the page size (1 to 1000, default 100) and ?prefix= the keys listed.
// When more follow, a Link header (RFC 8288) with rel="next" and the "next"
// member give the next page's URL, a relative reference holding ?page=, an
// opaque token; a tampered token or one for another prefix is 400.
func (h *handler[T]) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultListLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListLimit {
			WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: fmt.Sprintf("limit must be a whole number from 1 to %d", maxListLimit)})
			return
		}
		limit = n
	}
	p, err := h.s.Page(r.Context(), q.Get("prefix"), limit, q.Get("page"))
	if errors.Is(err, etagstore.ErrInvalidInput) {
		WriteProblem(w, Problem{Status: http.StatusBadRequest, Detail: "the page token is not valid for this listing"})
		return
	}
	if err != nil {
		h.serverError(w, r, Problem{Status: http.StatusInternalServerError, Detail: cmp.Or(misconfigured(err), "storage error")}, err)
		return
	}
	type entry struct {
		Key   string `json:"key"`
		ETag  string `json:"etag"`
		Value T      `json:"value"`
	}
	body := struct {
		Documents []entry `json:"documents"`
		Next      string  `json:"next,omitempty"`
	}{Documents: make([]entry, 0, len(p.Docs))}
	for _, d := range p.Docs {
		if h.checkKey != nil && h.checkKey(d.Key) != nil {
			continue // a key the handler does not serve is not listed either
		}
		body.Documents = append(body.Documents, entry{Key: d.Key, ETag: FormatETag(d.ETag), Value: d.Value})
	}
	if p.Next != "" {
		q.Set("page", p.Next)
		body.Next = "?" + q.Encode()
		w.Header().Set("Link", "<"+body.Next+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}
