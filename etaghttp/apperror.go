package etaghttp

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/etagstore/etagstore"
)

// Error is an answer the app chooses from its own code inside the
// Handler: an error of a HandlerOptions hook (Transact's fn or Transact
// itself, Prepare, CheckKey, Key) or of T's own JSON decoding (an
// UnmarshalJSON that validates). Returned as a value or a pointer, wrapped
// or not (the Handler finds it with errors.As), it is answered as an
// RFC 9457 problem (application/problem+json) with Status, Title (the
// status text when empty) and Detail:
//
//	if taken {
//		return etaghttp.Error{Status: http.StatusConflict, Title: "Title taken",
//			Detail: "a card with this title already exists on the board"}
//	}
//
// An Error returned from Transact's fn aborts the transaction: nothing of
// it is written. An Error does not match etagstore.ErrConflict, so the
// Store does not retry it; it runs fn again only when a document fn read
// changed meanwhile (Store.Transact), so that the refusal the client gets
// was made on current documents. The request's preconditions are checked
// first: a stale If-Match is 412 whatever Prepare returned. An Error
// anywhere in an error's chain is answered before any storage sentinel in
// the same chain.
//
// Status must be a client or server error, 400 to 599. Any other value
// (0 when it was left out, or a 2xx or 3xx) is a mistake of the app's
// code: the client gets 500 Internal Server Error without the Title and
// Detail, and the Logger an Error record naming the status given.
//
// HandlerOptions.Logger gets one record for every Error answered: at level
// Info for a 4xx (a refusal the app meant; the operator's log is not the
// place for an alarm) and at level Error for a 5xx, with the request's
// method, the status, the title, the detail and the error (its chain's
// text).
type Error struct {
	Status int
	Title  string
	Detail string
}

// Error returns the answer as one line: "etaghttp: 409 Title taken: a card
// with this title already exists", with the status text when Title is
// empty and the line breaks of Title or Detail replaced by spaces.
func (e Error) Error() string {
	s := "etaghttp: " + strconv.Itoa(e.Status)
	if t := cmp.Or(e.Title, http.StatusText(e.Status)); t != "" {
		s += " " + t
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return oneLine.Replace(s)
}

var oneLine = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// validStatus reports whether status is one an Error may answer with.
func validStatus(status int) bool { return status >= 400 && status <= 599 }

// appAnswer returns the answer err names for itself, and whether it names
// one: the app's Error, as a value or a pointer. Every write error reaches
// it (through answerApp) before the storage sentinels are mapped (fail,
// failWrite, create, inTx).
func appAnswer(err error) (Error, bool) {
	var (
		v Error
		p *Error
	)
	switch {
	case err == nil:
		return Error{}, false
	case errors.As(err, &v):
		return v, true
	case errors.As(err, &p):
		if p == nil {
			// A nil *Error returned as an error: the app meant an answer
			// and gave none; answered as an Error without a status (500).
			return Error{}, true
		}
		return *p, true
	}
	return Error{}, false
}

// answerApp answers err with the answer it names for itself, if it names
// one, and reports whether it did: the Error the app chose (appAnswer),
// which is logged, or else a *etagstore.UniqueError, 409 naming the
// index, the value and the document holding it (answerUnique; it matches
// ErrExists, which a create would otherwise answer 412). key names the
// resource in the problem (a mapped key is replaced by the path).
func (h *handler[T]) answerApp(w http.ResponseWriter, r *http.Request, key string, err error) bool {
	e, ok := appAnswer(err)
	if !ok {
		var ue *etagstore.UniqueError
		if err != nil && errors.As(err, &ue) && ue != nil {
			h.answerUnique(w, key, ue)
			return true
		}
		return false
	}
	p := Problem{Status: e.Status, Title: e.Title, Detail: e.Detail, Key: key}
	level := slog.LevelInfo
	if !validStatus(e.Status) {
		p = Problem{Status: http.StatusInternalServerError, Key: key}
	}
	if p.Status >= 500 {
		level = slog.LevelError
	}
	h.logApp(r, level, p, e, err)
	WriteProblem(w, p)
	return true
}

// logApp records the app's answer p (chosen as e, in err) at level.
func (h *handler[T]) logApp(r *http.Request, level slog.Level, p Problem, e Error, err error) {
	if h.log == nil {
		return
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.Int("status", p.Status)}
	if p.Status != e.Status {
		attrs = append(attrs, slog.Int("app_status", e.Status),
			slog.String("problem", "etaghttp.Error.Status must be 400 to 599"))
	}
	attrs = append(attrs, slog.String("title", cmp.Or(e.Title, http.StatusText(e.Status))),
		slog.String("detail", e.Detail), slog.Any("err", err))
	h.log.LogAttrs(r.Context(), level, "etaghttp: "+http.StatusText(p.Status), attrs...)
}

// ProblemUnique is the type of the problem answering a write refused
// because a unique index's value is held by another document (409).
const ProblemUnique = "https://etagstore.dev/problems/unique"

// answerUnique answers a write refused by a unique index (ue): 409 with
// the index, the value and, where it is a key the client may see, the
// document holding it (heldBy). heldBy is left out when keys are mapped
// (HandlerOptions.Key: a key never appears in an answer), when CheckKey
// refuses the holder's key (the Handler does not serve it), and when the
// refused document is not the request's (a write of the app's own in
// HandlerOptions.Transact, whose holder may be another Store's key).
// Nothing else of the error is answered.
func (h *handler[T]) answerUnique(w http.ResponseWriter, key string, ue *etagstore.UniqueError) {
	p := Problem{
		Type: ProblemUnique, Title: "The value is taken", Status: http.StatusConflict, Key: key,
		Detail: fmt.Sprintf("another document holds the value %s of the unique index %s, so nothing was written: choose another value, or change or delete the document holding it first", strconv.Quote(ue.Value), strconv.Quote(ue.Index)),
		Index:  ue.Index, Value: ue.Value,
	}
	if h.key == nil && ue.By == key && (h.checkKey == nil || h.checkKey(ue.Key) == nil) {
		p.HeldBy = ue.Key
	}
	WriteProblem(w, p)
}
