package etaghttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// broken is a backend whose storage is unreachable: every read and listing
// fails with errBroken (as a table never created does).
type broken struct{ driver.Backend }

var errBroken = errors.New("test: the table does not exist")

func (broken) Read(context.Context, string) (driver.Item, error) { return driver.Item{}, errBroken }
func (broken) List(context.Context, string) iter.Seq2[driver.Item, error] {
	return func(yield func(driver.Item, error) bool) { yield(driver.Item{}, errBroken) }
}
func (broken) Write(context.Context, string, driver.Write) (etagstore.ETag, error) {
	return "", fmt.Errorf("%w: %w", driver.ErrNotFound, errBroken) // what a missing table answers
}
func (broken) ListPage(context.Context, string, string, int) ([]driver.Item, bool, error) {
	return nil, false, errBroken
}

// unset is a backend whose table was never created: every request is
// answered as tablestore answers Azure's TableNotFound.
type unset struct{ driver.Backend }

func errUnset(key string) error {
	return fmt.Errorf("%w: tablestore: %q: the table does not exist: %w", driver.ErrStorageNotFound, key,
		&azcore.ResponseError{ErrorCode: "TableNotFound", StatusCode: http.StatusNotFound})
}

func (unset) Read(_ context.Context, key string) (driver.Item, error) {
	return driver.Item{}, errUnset(key)
}
func (unset) Write(_ context.Context, key string, _ driver.Write) (etagstore.ETag, error) {
	return "", errUnset(key)
}
func (unset) Delete(_ context.Context, key string, _ etagstore.ETag) error { return errUnset(key) }
func (unset) ListPage(context.Context, string, string, int) ([]driver.Item, bool, error) {
	return nil, false, errUnset("")
}

// A missing table is the operator's to fix: every request is 500 saying
// the storage is not set up, logged, never 404 or 412.
func TestMissingTableIsMisconfiguration(t *testing.T) {
	s := etagstore.New[Page](unset{memstore.New(nil)}, nil)
	rec := &records{}
	srv := newServer(t, etaghttp.Handler(s, &etaghttp.HandlerOptions[Page]{Logger: slog.New(rec)}))
	for _, tc := range []struct{ method, path, body, cond, tag string }{
		{"GET", "/", "", "", ""},
		{"GET", "/home", "", "", ""},
		{"GET", "/home", "", "If-Match", `"eA"`},
		{"PUT", "/home", `{"title":"x"}`, "If-None-Match", "*"},
		{"PUT", "/home", `{"title":"x"}`, "If-Match", `"eA"`},
		{"PUT", "/home", `{"title":"x"}`, "If-Match", "*"},
		{"PATCH", "/home", `{"title":"x"}`, "If-Match", `"eA"`},
		{"DELETE", "/home", "", "If-Match", `"eA"`},
		{"DELETE", "/home", "", "If-Match", "*"},
	} {
		hdr := map[string]string{}
		if tc.cond != "" {
			hdr[tc.cond] = tc.tag
		}
		resp, body := do(t, srv, tc.method, tc.path, tc.body, hdr)
		var p etaghttp.Problem
		if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusInternalServerError || !strings.Contains(p.Detail, "not set up") {
			t.Errorf("%s %s %s: %s: %d %s, want 500 saying the storage is not set up", tc.method, tc.path, tc.cond, tc.tag, resp.StatusCode, body)
		}
		if got := rec.take(); len(got) != 1 {
			t.Errorf("%s %s %s: %s: %d log records, want 1", tc.method, tc.path, tc.cond, tc.tag, len(got))
		}
	}
}

// records keeps the slog records it is given.
type records struct {
	mu  sync.Mutex
	got []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) take() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// Every 5xx answer is logged once at the operator's Logger with its cause;
// the client is told only that storage failed.
func TestStorageFailuresAreLogged(t *testing.T) {
	s := etagstore.New[Page](broken{memstore.New(nil)}, nil)
	rec := &records{}
	srv := newServer(t, etaghttp.Handler(s, &etaghttp.HandlerOptions[Page]{Logger: slog.New(rec)}))
	for _, tc := range []struct{ method, path, body, ifMatch string }{
		{"GET", "/", "", ""},
		{"PUT", "/home", `{"title":"x"}`, ""}, // create, with If-None-Match: *
		{"GET", "/home", "", ""},
		{"PUT", "/home", `{"title":"x"}`, `"eA"`},
		{"PATCH", "/home", `{"title":"x"}`, `"eA"`},
		{"DELETE", "/home", "", `"eA"`},
	} {
		hdr := map[string]string{"If-None-Match": "*"}
		if tc.ifMatch != "" {
			hdr = map[string]string{}
			hdr["If-Match"] = tc.ifMatch
		}
		resp, body := do(t, srv, tc.method, tc.path, tc.body, hdr)
		got := rec.take()
		if resp.StatusCode != http.StatusInternalServerError || strings.Contains(body, errBroken.Error()) || strings.Contains(body, "If-None-Match") {
			t.Errorf("%s %s: %d %s, want 500 without the cause", tc.method, tc.path, resp.StatusCode, body)
		}
		if len(got) != 1 {
			t.Fatalf("%s %s: %d log records, want 1", tc.method, tc.path, len(got))
		}
		attrs := map[string]string{}
		got[0].Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if got[0].Level != slog.LevelError || !strings.Contains(attrs["err"], errBroken.Error()) ||
			attrs["method"] != tc.method || attrs["status"] != "500" {
			t.Errorf("%s %s: logged %q %v, want an error record with the cause", tc.method, tc.path, got[0].Message, attrs)
		}
	}
	// Without a Logger nothing is logged, and nothing breaks.
	srv = newServer(t, etaghttp.Handler(s, nil))
	if resp, _ := do(t, srv, "GET", "/home", "", nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("GET without a Logger: %d", resp.StatusCode)
	}
}

// A GET of a missing document is 404 with a problem body naming the key.
func TestGetMissingIsAProblem(t *testing.T) {
	s := etagstore.New[Page](memstore.New(nil), nil)
	srv := newServer(t, etaghttp.Handler(s, nil))
	resp, body := do(t, srv, "GET", "/nope", "", nil)
	var p etaghttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusNotFound ||
		resp.Header.Get("Content-Type") != "application/problem+json" || p.Key != "nope" || p.Detail == "" || p.Status != 404 {
		t.Errorf("GET of a missing document: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// A create (If-None-Match: *) of an existing document is 412 saying it
// exists, never asking for the If-None-Match: * it sent.
func TestCreateExisting(t *testing.T) {
	s := etagstore.New[Page](memstore.New(nil), nil)
	srv := newServer(t, etaghttp.Handler(s, nil))
	if resp, _ := do(t, srv, "PUT", "/home", `{"title":"a"}`, map[string]string{"If-None-Match": "*"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	resp, body := do(t, srv, "PUT", "/home", `{"title":"b"}`, map[string]string{"If-None-Match": "*"})
	var p etaghttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusPreconditionFailed ||
		!strings.Contains(p.Detail, "exists") || strings.Contains(p.Detail, "send If-None-Match") || strings.Contains(p.Detail, "with PUT and If-None-Match") {
		t.Errorf("second create: %d %s", resp.StatusCode, body)
	}
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
