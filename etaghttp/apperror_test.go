package etaghttp_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// logBuffer is a Logger writing JSON records to a buffer, every level.
type logBuffer struct{ bytes.Buffer }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(&b.Buffer, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// take returns the records written since the last take, decoded.
func (b *logBuffer) take(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	b.Reset()
	return out
}

// problemOf decodes an answer that must be an RFC 9457 problem.
func problemOf(t *testing.T, resp *http.Response, body string) etaghttp.Problem {
	t.Helper()
	var p etaghttp.Problem
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json (%s)", ct, body)
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Errorf("problem body %q: %v", body, err)
	}
	return p
}

// errTitleTaken and errNoColumn are the kanban app's own refusals.
var (
	errTitleTaken = etaghttp.Error{Status: http.StatusConflict, Title: "Title taken", Detail: "a card with this title already exists on the board"}
	errNoColumn   = etaghttp.Error{Status: http.StatusUnprocessableEntity, Detail: "the board has no column \"later\""}
)

// appKanban serves /cards/{id} with every write in a transaction that
// first writes the board's count and then returns refuse() (when not nil)
// instead of calling write: a refusal after a write of the app's own.
func appKanban(s *etagstore.Store[kanbanItem], log *slog.Logger, refuse func() error) http.Handler {
	return etaghttp.Handler(s, &etaghttp.HandlerOptions[kanbanItem]{
		Logger: log,
		Key: func(r *http.Request) (string, error) {
			return "card." + strings.TrimPrefix(r.URL.Path, "/cards/"), nil
		},
		Transact: func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
			_, err := s.Transact(r.Context(), func(tx *etagstore.Tx[kanbanItem]) error {
				if err := count(tx, "todo", +1); err != nil {
					return err
				}
				if err := refuse(); err != nil {
					return err
				}
				return write(tx)
			})
			return err
		},
	})
}

// The app's Error, returned from its transaction as a value or a pointer,
// wrapped or not, is answered with its own status, title and detail as an
// RFC 9457 problem; nothing of the transaction is written; the Logger gets
// one record at Info with the detail, never at Error.
func TestAppErrorKeepsItsStatus(t *testing.T) {
	ctx := t.Context()
	pTaken, pNoColumn := errTitleTaken, errNoColumn
	for _, tc := range []struct {
		name string
		err  error
		want etaghttp.Error
	}{
		{"value 409", errTitleTaken, errTitleTaken},
		{"pointer 409", &pTaken, errTitleTaken},
		{"wrapped value 409", fmt.Errorf("adding card: %w", errTitleTaken), errTitleTaken},
		{"wrapped pointer 409", fmt.Errorf("adding card: %w", &pTaken), errTitleTaken},
		{"value 422", errNoColumn, errNoColumn},
		{"pointer 422", &pNoColumn, errNoColumn},
		{"wrapped value 422", fmt.Errorf("moving card: %w", errNoColumn), errNoColumn},
		{"wrapped pointer 422", fmt.Errorf("moving card: %w", &pNoColumn), errNoColumn},
		{"joined 422", errors.Join(errors.New("validation"), errNoColumn), errNoColumn},
		{"beside a sentinel 409", fmt.Errorf("%w: %w", errTitleTaken, etagstore.ErrNotFound), errTitleTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := etagstore.New[kanbanItem](memstore.New(nil), nil)
			if _, err := s.Create(ctx, "board.todo", kanbanItem{Title: "todo"}); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			h := appKanban(s, logs.logger(), func() error { return tc.err })
			for _, req := range []struct{ method, body, cond, tag string }{
				{"PUT", `{"Title":"write tests","Board":"todo"}`, "If-None-Match", "*"},
				{"PUT", `{"Title":"write tests","Board":"todo"}`, "If-Match", "*"},
				{"PATCH", `{"Board":"later"}`, "If-Match", "*"},
				{"DELETE", "", "If-Match", "*"},
			} {
				resp, body := serve(h, req.method, "/cards/1", req.body, map[string]string{req.cond: req.tag})
				p := problemOf(t, resp, body)
				wantTitle := tc.want.Title
				if wantTitle == "" {
					wantTitle = http.StatusText(tc.want.Status)
				}
				if resp.StatusCode != tc.want.Status || p.Status != tc.want.Status || p.Title != wantTitle ||
					p.Detail != tc.want.Detail || p.Key != "/cards/1" {
					t.Errorf("%s %s: %d %s, want %d titled %q with the app's detail", req.method, req.cond, resp.StatusCode, body, tc.want.Status, wantTitle)
				}
				recs := logs.take(t)
				if len(recs) != 1 {
					t.Fatalf("%s: %d log records, want 1: %v", req.method, len(recs), recs)
				}
				rec := recs[0]
				if rec["level"] != "INFO" || rec["detail"] != tc.want.Detail || rec["method"] != req.method ||
					rec["status"] != float64(tc.want.Status) || rec["title"] != wantTitle || !strings.Contains(fmt.Sprint(rec["err"]), tc.want.Detail) {
					t.Errorf("%s: logged %v, want one INFO record with the status, title and detail", req.method, rec)
				}
			}
			if b, _ := s.Get(ctx, "board.todo"); b.Value.Count != 0 {
				t.Errorf("the board's count after the refusals: %d, want 0 (nothing of the transaction written)", b.Value.Count)
			}
			if _, err := s.Get(ctx, "card.1"); !errors.Is(err, etagstore.ErrNotFound) {
				t.Errorf("the card after the refusals: %v, want ErrNotFound", err)
			}
		})
	}
}

// A 5xx the app chooses is answered with its title and detail and logged
// at Error; a Status outside 400..599 (left out, 2xx, 3xx, 600, a nil
// *Error) is the app's mistake: 500 without the app's title and detail,
// logged at Error naming the status given.
func TestAppErrorStatusOutOfRange(t *testing.T) {
	ctx := t.Context()
	unavailable := etaghttp.Error{Status: http.StatusServiceUnavailable, Title: "Board frozen", Detail: "the board is being archived"}
	for _, tc := range []struct {
		name      string
		err       error
		want      int
		appStatus any // logged app_status; nil: none
		shown     bool
	}{
		{"503 in range", unavailable, 503, nil, true},
		{"503 pointer", &unavailable, 503, nil, true},
		{"status left out", etaghttp.Error{Detail: "secret: title taken"}, 500, float64(0), false},
		{"200", etaghttp.Error{Status: 200, Title: "OK?", Detail: "secret"}, 500, float64(200), false},
		{"302 pointer", &etaghttp.Error{Status: 302, Detail: "secret"}, 500, float64(302), false},
		{"600 wrapped", fmt.Errorf("x: %w", etaghttp.Error{Status: 600, Detail: "secret"}), 500, float64(600), false},
		{"399", etaghttp.Error{Status: 399, Detail: "secret"}, 500, float64(399), false},
		{"nil pointer", (*etaghttp.Error)(nil), 500, float64(0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := etagstore.New[kanbanItem](memstore.New(nil), nil)
			if _, err := s.Create(ctx, "board.todo", kanbanItem{Title: "todo"}); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			h := appKanban(s, logs.logger(), func() error { return tc.err })
			resp, body := serve(h, "PUT", "/cards/1", `{"Title":"t"}`, map[string]string{"If-None-Match": "*"})
			p := problemOf(t, resp, body)
			if resp.StatusCode != tc.want || p.Status != tc.want {
				t.Errorf("answer %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.shown && (p.Title != unavailable.Title || p.Detail != unavailable.Detail) {
				t.Errorf("answer %s, want the app's title and detail", body)
			}
			if !tc.shown && (strings.Contains(body, "secret") || strings.Contains(body, "OK?") || p.Title != "Internal Server Error") {
				t.Errorf("answer %s, want 500 Internal Server Error without the app's title or detail", body)
			}
			recs := logs.take(t)
			if len(recs) != 1 || recs[0]["level"] != "ERROR" || recs[0]["status"] != float64(tc.want) || recs[0]["app_status"] != tc.appStatus {
				t.Fatalf("logged %v, want one ERROR record with status %d and app_status %v", recs, tc.want, tc.appStatus)
			}
			if b, _ := s.Get(ctx, "board.todo"); b.Value.Count != 0 {
				t.Errorf("the board's count: %d, want 0 (nothing written)", b.Value.Count)
			}
		})
	}
}

// vetted validates itself as it decodes: T's own UnmarshalJSON is app code
// too, and its Error is answered as the app chose.
type vetted struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
}

func (v *vetted) UnmarshalJSON(b []byte) error {
	type plain vetted
	if err := json.Unmarshal(b, (*plain)(v)); err != nil {
		return err
	}
	if v.Title == "" {
		return etaghttp.Error{Status: http.StatusUnprocessableEntity, Title: "Invalid page", Detail: "a page needs a title"}
	}
	return nil
}

// Every hook the app runs inside the Handler answers with its Error:
// CheckKey, Key, Prepare (on every write path: create, If-Match with a
// tag and with *, PATCH, and inside Transact), Transact itself before it
// calls Store.Transact, and T's UnmarshalJSON. A hook's other errors are
// still 400 with their text. The preconditions come first: a stale
// If-Match is 412 whatever Prepare says.
func TestAppErrorFromEveryHook(t *testing.T) {
	ctx := t.Context()
	gone := etaghttp.Error{Status: http.StatusGone, Detail: "this page was retired"}
	badTitle := &etaghttp.Error{Status: http.StatusUnprocessableEntity, Title: "Invalid page", Detail: "a title is at most 10 letters"}
	prepare := func(_ *http.Request, _ string, _, v *vetted) error {
		switch {
		case len(v.Title) > 10:
			return fmt.Errorf("prepare: %w", badTitle)
		case v.Title == "plain":
			return errors.New("plain error")
		}
		return nil
	}
	s := etagstore.New[vetted](memstore.New(nil), nil)
	cur, err := s.Create(ctx, "home", vetted{Title: "Home"})
	if err != nil {
		t.Fatal(err)
	}
	tag := etaghttp.FormatETag(cur.ETag)
	var logs logBuffer
	opts := func() *etaghttp.HandlerOptions[vetted] {
		return &etaghttp.HandlerOptions[vetted]{
			Logger:  logs.logger(),
			Prepare: prepare,
			CheckKey: func(key string) error {
				switch key {
				case "retired":
					return gone
				case "bad~key":
					return errors.New("keys have no tildes")
				}
				return nil
			},
		}
	}
	plain := etaghttp.Handler(s, opts())
	o := opts()
	o.Key = func(r *http.Request) (string, error) {
		if r.URL.Path == "/nowhere" {
			return "", &etaghttp.Error{Status: http.StatusNotFound, Detail: "no such route"}
		}
		return strings.TrimPrefix(r.URL.Path, "/"), nil
	}
	keyed := etaghttp.Handler(s, o)
	o = opts()
	o.Transact = func(r *http.Request, key string, write func(*etagstore.Tx[vetted]) error) error {
		if r.Header.Get("X-Refuse") != "" {
			return etaghttp.Error{Status: http.StatusForbidden, Detail: "read-only board"}
		}
		return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error { return write(s.In(tx)) })
	}
	inTx := etaghttp.Handler(s, o)

	long := `{"title":"far too long a title"}`
	for _, tc := range []struct {
		name         string
		h            http.Handler
		method, path string
		body         string
		hdr          map[string]string
		status       int
		detail       string
		logged       bool
	}{
		{"CheckKey", plain, "GET", "/retired", "", nil, 410, gone.Detail, true},
		{"CheckKey plain error", plain, "GET", "/bad~key", "", nil, 400, "keys have no tildes", false},
		{"Key", keyed, "GET", "/nowhere", "", nil, 404, "no such route", true},
		{"Prepare on create", plain, "PUT", "/new", long, map[string]string{"If-None-Match": "*"}, 422, badTitle.Detail, true},
		{"Prepare on PUT If-Match tag", plain, "PUT", "/home", long, map[string]string{"If-Match": tag}, 422, badTitle.Detail, true},
		{"Prepare on PUT If-Match *", plain, "PUT", "/home", long, map[string]string{"If-Match": "*"}, 422, badTitle.Detail, true},
		{"Prepare on PATCH", plain, "PATCH", "/home", long, map[string]string{"If-Match": tag}, 422, badTitle.Detail, true},
		{"Prepare plain error", plain, "PATCH", "/home", `{"title":"plain"}`, map[string]string{"If-Match": tag}, 400, "plain error", false},
		{"Prepare in Transact", inTx, "PATCH", "/home", long, map[string]string{"If-Match": tag}, 422, badTitle.Detail, true},
		{"Prepare in Transact, create", inTx, "PUT", "/new", long, map[string]string{"If-None-Match": "*"}, 422, badTitle.Detail, true},
		{"Transact itself", inTx, "DELETE", "/home", "", map[string]string{"If-Match": tag, "X-Refuse": "1"}, 403, "read-only board", true},
		{"UnmarshalJSON of a PUT", plain, "PUT", "/home", `{"body":"no title"}`, map[string]string{"If-Match": tag}, 422, "a page needs a title", true},
		{"UnmarshalJSON of a PATCH", plain, "PATCH", "/home", `{"title":null}`, map[string]string{"If-Match": tag}, 422, "a page needs a title", true},
		{"stale If-Match first", plain, "PUT", "/home", long, map[string]string{"If-Match": `"c3RhbGU"`}, 412, "", false},
		{"stale If-Match first, Transact", inTx, "PUT", "/home", long, map[string]string{"If-Match": `"c3RhbGU"`}, 412, "", false},
	} {
		resp, body := serve(tc.h, tc.method, tc.path, tc.body, tc.hdr)
		p := problemOf(t, resp, body)
		if resp.StatusCode != tc.status || p.Status != tc.status || tc.detail != "" && !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, resp.StatusCode, body, tc.status, tc.detail)
		}
		recs := logs.take(t)
		switch {
		case tc.logged && (len(recs) != 1 || recs[0]["level"] != "INFO" || recs[0]["detail"] != tc.detail):
			t.Errorf("%s: logged %v, want one INFO record with the detail", tc.name, recs)
		case !tc.logged && len(recs) != 0:
			t.Errorf("%s: logged %v, want nothing", tc.name, recs)
		}
	}
	if d, err := s.Get(ctx, "home"); err != nil || d.ETag != cur.ETag {
		t.Errorf("home after the refusals: %+v %v, want it as it was", d, err)
	}
	if _, err := s.Get(ctx, "new"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("new after the refusals: %v, want ErrNotFound", err)
	}
	// Without a Logger the answer is the same.
	if resp, body := serve(etaghttp.Handler(s, &etaghttp.HandlerOptions[vetted]{Prepare: prepare}), "PUT", "/home", long, map[string]string{"If-Match": "*"}); resp.StatusCode != 422 {
		t.Errorf("without a Logger: %d %s, want 422", resp.StatusCode, body)
	}
}

// Error's text is one line, with the status text when Title is empty; a
// value and a pointer say the same.
func TestAppErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errTitleTaken, "etaghttp: 409 Title taken: a card with this title already exists on the board"},
		{&errTitleTaken, "etaghttp: 409 Title taken: a card with this title already exists on the board"},
		{etaghttp.Error{Status: 422, Detail: "no column"}, "etaghttp: 422 Unprocessable Entity: no column"},
		{etaghttp.Error{Status: 409}, "etaghttp: 409 Conflict"},
		{etaghttp.Error{Detail: "no status"}, "etaghttp: 0: no status"},
		{etaghttp.Error{Status: 400, Title: "Bad\ncard", Detail: "line one\r\nline two\rthree"}, "etaghttp: 400 Bad card: line one line two three"},
	} {
		if got := tc.err.Error(); got != tc.want || strings.ContainsAny(got, "\r\n") {
			t.Errorf("%#v.Error() = %q, want %q", tc.err, got, tc.want)
		}
	}
}
