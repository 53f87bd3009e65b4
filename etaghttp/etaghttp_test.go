package etaghttp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

func TestETagRoundTrip(t *testing.T) {
	for _, e := range []etagstore.ETag{`W/"datetime'2026-11-25T21%3A39%3A52.0061214Z'"`, `"0x8DC1234567"`, `"0x1F"`, "weird, \"quoted\" é"} {
		got, err := etaghttp.ParseETag(etaghttp.FormatETag(e))
		if err != nil || got != e {
			t.Errorf("round trip of %q = %q, %v", e, got, err)
		}
		weak, err := etaghttp.ParseETag("W/" + etaghttp.FormatETag(e))
		if err != nil || weak != e {
			t.Errorf("weak round trip of %q = %q, %v", e, weak, err)
		}
	}
}

type Page struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

func do(t *testing.T, srv *httptest.Server, method, path, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHandlerRules(t *testing.T) {
	s := etagstore.New[Page](memstore.New(nil), nil)
	mux := http.NewServeMux()
	mux.Handle("/api/pages/", http.StripPrefix("/api/pages", etaghttp.Handler(s, &etaghttp.HandlerOptions[Page]{MaxBodyBytes: 1024})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// Create with If-None-Match: *, twice.
	resp, _ := do(t, srv, "PUT", "/api/pages/home", `{"title":"Home","body":"hi"}`, map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("ETag") == "" {
		t.Fatalf("create: %d, ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	v1 := resp.Header.Get("ETag")
	if resp, _ := do(t, srv, "PUT", "/api/pages/home", `{}`, map[string]string{"If-None-Match": "*"}); resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("second create: %d, want 412", resp.StatusCode)
	}
	// Conditional GET.
	if resp, _ := do(t, srv, "GET", "/api/pages/home", "", map[string]string{"If-None-Match": v1}); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("GET If-None-Match current: %d, want 304", resp.StatusCode)
	}
	if resp, body := do(t, srv, "GET", "/api/pages/home", "", nil); resp.StatusCode != 200 || !strings.Contains(body, `"Home"`) {
		t.Fatalf("GET: %d %s", resp.StatusCode, body)
	}
	// Writes without If-Match: 428, nothing written.
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		if resp, body := do(t, srv, m, "/api/pages/home", `{"title":"blind"}`, nil); resp.StatusCode != http.StatusPreconditionRequired || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s without If-Match: %d %s", m, resp.StatusCode, body)
		}
	}
	// PUT with the current ETag, then the stale one: 412 with the facts.
	resp, _ = do(t, srv, "PUT", "/api/pages/home", `{"title":"Home","body":"v2"}`, map[string]string{"If-Match": v1})
	if resp.StatusCode != 200 {
		t.Fatalf("PUT current: %d", resp.StatusCode)
	}
	v2 := resp.Header.Get("ETag")
	resp, body := do(t, srv, "PUT", "/api/pages/home", `{"title":"Home","body":"stale"}`, map[string]string{"If-Match": v1})
	var p etaghttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale PUT: %d %s", resp.StatusCode, body)
	}
	if p.CurrentETag != v2 || !strings.Contains(p.Diff, "stale") || p.Status != 412 {
		t.Fatalf("problem = %+v, want current ETag %s and a diff", p, v2)
	}
	// PATCH (merge patch) keeps the other field.
	resp, body = do(t, srv, "PATCH", "/api/pages/home", `{"title":"Start"}`, map[string]string{"If-Match": v2})
	if resp.StatusCode != 200 || !strings.Contains(body, `"v2"`) || !strings.Contains(body, `"Start"`) {
		t.Fatalf("PATCH: %d %s", resp.StatusCode, body)
	}
	v3 := resp.Header.Get("ETag")
	if resp, _ := do(t, srv, "PATCH", "/api/pages/home", `{"title":"x"}`, map[string]string{"If-Match": v2}); resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale PATCH: %d", resp.StatusCode)
	}
	// Body limit.
	if resp, _ := do(t, srv, "PUT", "/api/pages/home", `{"body":"`+strings.Repeat("x", 2000)+`"}`, map[string]string{"If-Match": v3}); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("big PUT: %d, want 413", resp.StatusCode)
	}
	// Overwrite on purpose, then delete with a stale and the current ETag.
	resp, _ = do(t, srv, "PUT", "/api/pages/home", `{"title":"forced"}`, map[string]string{"If-Match": "*"})
	if resp.StatusCode != 200 {
		t.Fatalf("PUT If-Match *: %d", resp.StatusCode)
	}
	v4 := resp.Header.Get("ETag")
	if resp, _ := do(t, srv, "DELETE", "/api/pages/home", "", map[string]string{"If-Match": v3}); resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale DELETE: %d", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "DELETE", "/api/pages/home", "", map[string]string{"If-Match": v4}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "GET", "/api/pages/home", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after DELETE: %d", resp.StatusCode)
	}
}
