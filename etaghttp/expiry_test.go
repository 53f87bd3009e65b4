package etaghttp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

// TestExpiredDocumentIs404: through etaghttp.Handler, a document that has
// expired by the Store's clock is missing: a GET answers 404 (with or
// without If-None-Match of its ETag, never a 304 that would keep a
// client's copy alive), the listing leaves it out, and every request
// about it answers as about a key never written; a PUT with If-None-Match
// * creates over it (201). 1 ms before, it is served.
func TestExpiredDocumentIs404(t *testing.T) {
	clock := storetest.NewFakeClock(storetest.ExpAt.Add(-time.Millisecond))
	s := etagstore.New[storetest.ExpCard](memstore.New(nil), &etagstore.Options{Clock: clock}, storetest.ExpUntil)
	mux := http.NewServeMux()
	mux.Handle("/cards/", http.StripPrefix("/cards", etaghttp.Handler(s, nil)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := t.Context()

	// One expiring document per request below (e0, e1, …), and a live one.
	requests := []struct {
		method string
		hdr    func(etag string) map[string]string
		body   string
		want   int // for the expired document, as for a key never written
	}{
		{"GET", func(string) map[string]string { return nil }, "", http.StatusNotFound},
		{"GET", func(e string) map[string]string { return map[string]string{"If-None-Match": e} }, "", http.StatusNotFound},
		{"GET", func(e string) map[string]string { return map[string]string{"If-Match": e} }, "", http.StatusPreconditionFailed},
		{"PUT", func(e string) map[string]string { return map[string]string{"If-Match": e} }, `{"Title":"put"}`, 0},
		{"PUT", func(string) map[string]string { return map[string]string{"If-Match": "*"} }, `{"Title":"put"}`, 0},
		{"PATCH", func(e string) map[string]string { return map[string]string{"If-Match": e} }, `{"Title":"patched"}`, 0},
		{"DELETE", func(e string) map[string]string { return map[string]string{"If-Match": e} }, "", 0},
		{"DELETE", func(string) map[string]string { return map[string]string{"If-Match": "*"} }, "", 0},
		{"PUT", func(string) map[string]string { return map[string]string{"If-None-Match": "*"} }, `{"Title":"new"}`, http.StatusCreated},
	}
	etags := map[string]string{}
	for i := range requests {
		key := fmt.Sprintf("e%d", i)
		d, err := s.Create(ctx, key, storetest.ExpCard{Title: key, Until: storetest.ExpAt})
		if err != nil {
			t.Fatal(err)
		}
		etags[key] = etaghttp.FormatETag(d.ETag)
	}
	if _, err := s.Create(ctx, "live", storetest.ExpCard{Title: "live"}); err != nil {
		t.Fatal(err)
	}

	// E − 1ms: served.
	resp, body := do(t, srv, "GET", "/cards/e0", "", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != etags["e0"] || !strings.Contains(body, `"e0"`) {
		t.Fatalf("at E−1ms: GET = %d %s (ETag %s), want 200 with the document", resp.StatusCode, body, resp.Header.Get("ETag"))
	}
	if got := listed(t, srv); got != "e0,e1,e2,e3,e4,e5,e6,e7,e8,live" {
		t.Fatalf("at E−1ms: listed %s", got)
	}

	clock.Set(storetest.ExpAt)
	for i, rq := range requests {
		key := fmt.Sprintf("e%d", i)
		resp, body := do(t, srv, rq.method, "/cards/"+key, rq.body, rq.hdr(etags[key]))
		// The same request about a key never written, with the same ETag.
		never, nbody := do(t, srv, rq.method, "/cards/never"+key, rq.body, rq.hdr(etags[key]))
		what := fmt.Sprintf("%s %v", rq.method, rq.hdr(etags[key]))
		if resp.StatusCode != never.StatusCode {
			t.Errorf("%s of an expired document = %d %s; of a key never written %d %s", what, resp.StatusCode, body, never.StatusCode, nbody)
		}
		if rq.want != 0 && resp.StatusCode != rq.want {
			t.Errorf("%s of an expired document = %d %s, want %d", what, resp.StatusCode, body, rq.want)
		}
	}
	// The create over e8 stored the new document, which never expires.
	resp, body = do(t, srv, "GET", "/cards/e8", "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"new"`) {
		t.Errorf("GET after the create over the expired document = %d %s, want 200 with it", resp.StatusCode, body)
	}
	if got := listed(t, srv); got != "e8,live,nevere8" {
		t.Errorf("at E: listed %s, want e8,live,nevere8 (the expired documents left out)", got)
	}
}

// listed is the keys the handler's listing holds, comma-separated.
func listed(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp, body := do(t, srv, "GET", "/cards/", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	var page struct {
		Documents []struct{ Key string } `json:"documents"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatalf("list: %v: %s", err, body)
	}
	var keys []string
	for _, d := range page.Documents {
		keys = append(keys, d.Key)
	}
	return strings.Join(keys, ",")
}
