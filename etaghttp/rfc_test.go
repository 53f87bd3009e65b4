package etaghttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// Rec is a document with numbers JSON's float64 cannot hold, untagged
// fields (names matched case-insensitively, as encoding/json does), a map
// (names matched exactly) and a nested struct.
type Rec struct {
	Title  string
	Big    int64
	U      uint64
	Meta   map[string]int `json:",omitempty"`
	Nested Inner
}

type Inner struct {
	X string
	N int64
}

func newRecServer(t *testing.T, b driver.Backend) (*httptest.Server, *etagstore.Store[Rec]) {
	t.Helper()
	if b == nil {
		b = memstore.New(nil)
	}
	s := etagstore.New[Rec](b, nil)
	srv := httptest.NewServer(etaghttp.Handler(s, nil))
	t.Cleanup(srv.Close)
	return srv, s
}

func create(t *testing.T, s *etagstore.Store[Rec], key string, v Rec) string {
	t.Helper()
	d, err := s.Create(t.Context(), key, v)
	if err != nil {
		t.Fatal(err)
	}
	return etaghttp.FormatETag(d.ETag)
}

func stored(t *testing.T, s *etagstore.Store[Rec], key string) etagstore.Doc[Rec] {
	t.Helper()
	d, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A PATCH changes what it names and nothing else: numbers beyond 2^53 and
// up to MaxUint64 come through exactly.
func TestPatchKeepsUntouchedMembersExactly(t *testing.T) {
	srv, s := newRecServer(t, nil)
	orig := Rec{Title: "a", Big: 1<<53 + 1, U: math.MaxUint64, Meta: map[string]int{"A": 1, "a": 2},
		Nested: Inner{X: "x", N: -(1<<62 + 3)}}
	tag := create(t, s, "r", orig)
	resp, body := do(t, srv, "PATCH", "/r", `{"Title":"b"}`, map[string]string{"If-Match": tag})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH: %d %s", resp.StatusCode, body)
	}
	want := orig
	want.Title = "b"
	if diff := cmp.Diff(want, stored(t, s, "r").Value); diff != "" {
		t.Errorf("stored after PATCH (-want +got):\n%s", diff)
	}
}

// RFC 7396: a null member removes the member, which resets the field to
// its zero value; struct fields are named as encoding/json matches them
// (case-insensitively), map keys exactly.
func TestPatchNullResetsField(t *testing.T) {
	for _, tc := range []struct {
		name, patch string
		change      func(*Rec)
	}{
		{"exact name", `{"Title":null}`, func(r *Rec) { r.Title = "" }},
		{"lower-case name", `{"title":null}`, func(r *Rec) { r.Title = "" }},
		{"nested member", `{"nested":{"x":null,"N":7}}`, func(r *Rec) { r.Nested = Inner{N: 7} }},
		{"map key, exactly", `{"Meta":{"a":null}}`, func(r *Rec) { r.Meta = map[string]int{"A": 1} }},
		{"lower-case set", `{"title":"new"}`, func(r *Rec) { r.Title = "new" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, s := newRecServer(t, nil)
			orig := Rec{Title: "t", Big: 5, Meta: map[string]int{"A": 1, "a": 2}, Nested: Inner{X: "x", N: 1}}
			tag := create(t, s, "r", orig)
			resp, body := do(t, srv, "PATCH", "/r", tc.patch, map[string]string{"If-Match": tag})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("PATCH %s: %d %s", tc.patch, resp.StatusCode, body)
			}
			want := orig
			want.Meta = map[string]int{"A": 1, "a": 2}
			tc.change(&want)
			if diff := cmp.Diff(want, stored(t, s, "r").Value); diff != "" {
				t.Errorf("PATCH %s (-want +got):\n%s", tc.patch, diff)
			}
		})
	}
}

// A body naming a field T does not have, or a null body, is refused with
// 400 naming the field; nothing is written.
func TestWriteRefusesUnknownFieldsAndNull(t *testing.T) {
	for _, tc := range []struct {
		method, body, want string
	}{
		{"PUT", `{"Titel":"typo"}`, `Titel`},
		{"PUT", `null`, `null`},
		{"PUT", ` {"Title":"x"} {"Title":"y"}`, `after`},
		{"PATCH", `{"Titel":"typo"}`, `Titel`},
		{"PATCH", `{"Nested":{"Y":1}}`, `Y`},
		{"PATCH", `null`, `null`},
		{"PATCH", `{"Title":"a","title":"b"}`, `Title`},
	} {
		t.Run(tc.method+" "+tc.body, func(t *testing.T) {
			srv, s := newRecServer(t, nil)
			tag := create(t, s, "r", Rec{Title: "kept", Big: 1})
			before := stored(t, s, "r")
			resp, body := do(t, srv, tc.method, "/r", tc.body, map[string]string{"If-Match": tag})
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s: %d %s, want 400 naming %q", tc.method, tc.body, resp.StatusCode, body, tc.want)
			}
			if after := stored(t, s, "r"); after.ETag != before.ETag {
				t.Errorf("a refused %s wrote %+v", tc.method, after.Value)
			}
		})
	}
}

// If-Match uses strong comparison (RFC 9110 §13.1.1): a weak tag never
// matches; a well-formed tag this server never issued is simply not
// current (412); only broken syntax is 400; If-Match: * on a missing
// document fails (412). If-None-Match on GET compares weakly.
func TestIfMatchComparison(t *testing.T) {
	srv, s := newRecServer(t, nil)
	cur := create(t, s, "r", Rec{Title: "t"})
	for _, tc := range []struct {
		name, method, path, ifMatch string
		want                        int
	}{
		{"weak current", "PUT", "/r", "W/" + cur, 412},
		{"weak current", "PATCH", "/r", "W/" + cur, 412},
		{"weak current", "DELETE", "/r", "W/" + cur, 412},
		{"never issued, not base64", "PUT", "/r", `"!!!"`, 412},
		{"never issued, not base64", "DELETE", "/r", `"abc.def"`, 412},
		{"never issued, empty", "PUT", "/r", `""`, 412},
		{"base64 of *", "PUT", "/r", `"` + "Kg" + `"`, 412},
		{"non-canonical base64 of the current", "PATCH", "/r", nonCanonical(t, cur), 412},
		{"unquoted", "PUT", "/r", `abc`, 400},
		{"unterminated", "PUT", "/r", `"abc`, 400},
		{"space inside", "PUT", "/r", `"a b"`, 400},
		{"star on missing", "PUT", "/missing", "*", 412},
		{"star on missing", "PATCH", "/missing", "*", 412},
		{"star on missing", "DELETE", "/missing", "*", 412},
		{"list holding the current", "PATCH", "/r", `"xyz", ` + cur, 200},
	} {
		t.Run(tc.method+" "+tc.name, func(t *testing.T) {
			resp, body := do(t, srv, tc.method, tc.path, `{"Title":"changed"}`, map[string]string{"If-Match": tc.ifMatch})
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s If-Match %s: %d %s, want %d", tc.method, tc.path, tc.ifMatch, resp.StatusCode, body, tc.want)
			}
			if tc.want == 412 && stored(t, s, "r").Value.Title != "t" {
				t.Fatal("a failed precondition wrote")
			}
		})
	}
	cur = etaghttp.FormatETag(stored(t, s, "r").ETag)
	for _, inm := range []string{cur, "W/" + cur, `"other", W/` + cur, "*"} {
		if resp, _ := do(t, srv, "GET", "/r", "", map[string]string{"If-None-Match": inm}); resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET If-None-Match %s: %d, want 304", inm, resp.StatusCode)
		}
	}
	if resp, _ := do(t, srv, "GET", "/r", "", map[string]string{"If-None-Match": `"!!!"`}); resp.StatusCode != http.StatusOK {
		t.Errorf("GET If-None-Match of a foreign tag: %d, want 200", resp.StatusCode)
	}
}

// nonCanonical returns tag with its last base64 character's unused low
// bits set: it decodes leniently to the same bytes but is another tag.
func nonCanonical(t *testing.T, tag string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	inner := tag[1 : len(tag)-1]
	unused := map[int]int{2: 4, 3: 2}[len(inner)%4] // bits of the last character that carry nothing
	if unused == 0 {
		t.Fatalf("tag %s has no unused bits: pick a document whose tag has", tag)
	}
	last := strings.IndexByte(alphabet, inner[len(inner)-1])
	return `"` + inner[:len(inner)-1] + string(alphabet[last|1]) + `"`
}

// lossy is a backend whose writes and deletes, once armed, commit and then
// lose their response, after which no read answers: the Store cannot tell
// whether the write was applied (etagstore.ErrOutcomeUnknown).
type lossy struct {
	driver.Backend
	armed, blind atomic.Bool
}

var errReset = errors.New("test: connection reset")

func (l *lossy) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	etag, err := l.Backend.Write(ctx, key, w)
	if l.armed.Load() {
		l.blind.Store(true)
		return "", errReset
	}
	return etag, err
}

func (l *lossy) Delete(ctx context.Context, key string, c driver.ETag) error {
	err := l.Backend.Delete(ctx, key, c)
	if l.armed.Load() {
		l.blind.Store(true)
		return errReset
	}
	return err
}

func (l *lossy) Read(ctx context.Context, key string) (driver.Item, error) {
	if l.blind.Load() {
		return driver.Item{}, errReset
	}
	return l.Backend.Read(ctx, key)
}

// A write that may have committed is neither 412 nor 500: 503 with a
// problem body saying it may have been applied and to GET the resource.
func TestOutcomeUnknownIs503(t *testing.T) {
	for _, tc := range []struct{ method, ifMatch string }{
		{"PUT", ""}, {"PUT", "*"}, {"PATCH", ""}, {"PATCH", "*"}, {"DELETE", ""}, {"DELETE", "*"},
	} {
		t.Run(tc.method+" "+tc.ifMatch, func(t *testing.T) {
			b := &lossy{Backend: memstore.New(nil)}
			srv, s := newRecServer(t, b)
			tag := create(t, s, "r", Rec{Title: "t"})
			if tc.ifMatch != "" {
				tag = tc.ifMatch
			}
			b.armed.Store(true)
			resp, body := do(t, srv, tc.method, "/r", `{"Title":"new"}`, map[string]string{"If-Match": tag})
			var p etaghttp.Problem
			_ = json.Unmarshal([]byte(body), &p)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(p.Detail, "may have been applied") || !strings.Contains(p.Detail, "GET") {
				t.Errorf("%s with a lost response: %d %s, want 503 saying it may have been applied", tc.method, resp.StatusCode, body)
			}
		})
	}
}

// Problem bodies show HTTP entity tags only; a PATCH conflict's diff shows
// what the patch would change in the current document.
func TestConflictProblemBody(t *testing.T) {
	srv, s := newRecServer(t, nil)
	old := create(t, s, "r", Rec{Title: "t", Big: 1})
	d, err := s.Replace(t.Context(), etagstore.Doc[Rec]{Key: "r", Value: Rec{Title: "theirs", Big: 1}, ETag: stored(t, s, "r").ETag})
	if err != nil {
		t.Fatal(err)
	}
	cur := etaghttp.FormatETag(d.ETag)
	for _, tc := range []struct{ method, body, diff string }{
		// One line per changed member: its JSON Pointer, theirs → mine.
		{"PUT", `{"Title":"mine","Big":1}`, `^/Title: "theirs" → "mine"\n$`},
		{"PATCH", `{"Title":"mine"}`, `^/Title: "theirs" → "mine"\n$`},
		// A DELETE would remove the document: no member-by-member diff.
		{"DELETE", ``, `^$`},
	} {
		t.Run(tc.method, func(t *testing.T) {
			resp, body := do(t, srv, tc.method, "/r", tc.body, map[string]string{"If-Match": old})
			var p etaghttp.Problem
			if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != 412 {
				t.Fatalf("stale %s: %d %s", tc.method, resp.StatusCode, body)
			}
			if p.CurrentETag != cur || !strings.Contains(p.Detail, cur) {
				t.Errorf("problem names current %q in %q, want %s", p.CurrentETag, p.Detail, cur)
			}
			if strings.Contains(body, string(d.ETag)) || strings.Contains(body, "attempt") {
				t.Errorf("problem shows a storage ETag or retry bookkeeping: %s", body)
			}
			if !regexp.MustCompile(tc.diff).MatchString(p.Diff) {
				t.Errorf("diff %q, want it to match %s", p.Diff, tc.diff)
			}
			if want := strings.Count(p.Diff, "\n"); len(p.Changes) != want || want == 1 &&
				(p.Changes[0].Path != "/Title" || string(p.Changes[0].Theirs) != `"theirs"` || string(p.Changes[0].Mine) != `"mine"`) {
				t.Errorf("changes %+v, want the diff's %d", p.Changes, want)
			}
		})
	}
}

// heldWrites holds every write while a gate is set, so that concurrent
// Updates are committed together (group commit): all but the last of a
// batch get a superseded ETag from the Store.
type heldWrites struct {
	driver.Backend
	mu   sync.Mutex
	gate chan struct{} // nil: writes pass
}

func (h *heldWrites) hold() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate = make(chan struct{})
	return h.gate
}

func (h *heldWrites) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return h.Backend.Write(ctx, key, w)
}

// serve answers one request with h on the calling goroutine, without a
// network (which a synctest bubble cannot wait for).
func serve(h http.Handler, method, path, body string, hdr map[string]string) (*http.Response, string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result(), rec.Body.String()
}

// A 2xx answer to a write carries the ETag of the version it stored, which
// the next If-Match accepts; a PATCH committed with later ones in one
// group-commit batch never stored a version of its own (its Doc holds a
// superseded ETag), and its answer carries no ETag: no superseded ETag
// ever reaches a client, and a GET gives the current one. If-Match: *
// never fails on an existing document, however busy. In a synctest
// bubble: the concurrent PATCHes queue behind a held write
// (synctest.Wait) and are committed as one batch.
func TestWriteAnswersCarryETag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// At the end, let the fake clock run out the Store's own timers (a
		// runner lingering after its last batch): every caller has returned.
		defer time.Sleep(time.Minute)
		b := &heldWrites{Backend: memstore.New(nil)}
		s := etagstore.New[Rec](b, nil)
		h := etaghttp.Handler(s, nil)
		tag := create(t, s, "r", Rec{})
		// A chain: each write's ETag is the next one's If-Match.
		for i, step := range []struct{ method, body string }{
			{"PUT", `{"Title":"1"}`}, {"PATCH", `{"Big":2}`}, {"PUT", `{"Title":"3"}`}, {"PATCH", `{"U":4}`},
		} {
			resp, body := serve(h, step.method, "/r", step.body, map[string]string{"If-Match": tag})
			tag = resp.Header.Get("ETag")
			if resp.StatusCode != 200 || tag == "" || tag == `""` {
				t.Fatalf("step %d %s: %d, ETag %q, %s", i, step.method, resp.StatusCode, tag, body)
			}
		}
		// Concurrent PATCHes with If-Match: *: all apply, each with an ETag of
		// a version holding its change. The first one's write is held until
		// the other fifteen have queued behind it: they are one batch.
		gate := b.hold()
		var wg sync.WaitGroup
		etags := make([]string, 16)
		for i := range 16 {
			wg.Go(func() {
				resp, body := serve(h, "PATCH", "/r", fmt.Sprintf(`{"Meta":{"k%d":%d}}`, i, i), map[string]string{"If-Match": "*"})
				etag := resp.Header.Get("ETag")
				etags[i] = etag
				var got Rec
				_ = json.Unmarshal([]byte(body), &got)
				if resp.StatusCode != 200 || etag == `""` || got.Meta[fmt.Sprint("k", i)] != i {
					t.Errorf("PATCH * #%d: %d, ETag %q, %s", i, resp.StatusCode, etag, body)
				}
			})
			if i == 0 {
				synctest.Wait() // its write is held
			}
		}
		synctest.Wait() // the other fifteen are queued
		close(gate)
		wg.Wait()
		cur := stored(t, s, "r")
		if n := len(cur.Value.Meta); n != 16 {
			t.Errorf("%d of 16 concurrent PATCHes applied", n)
		}
		without := 0
		for i, etag := range etags {
			if etag == "" {
				without++
				continue
			}
			tag, err := etaghttp.ParseETag(etag)
			if err != nil || tag.Superseded() {
				t.Errorf("PATCH #%d answered the ETag %s (%q): a superseded or malformed tag reached the client", i, etag, tag)
				continue
			}
			// A version's ETag: the last of the batch holds the current one.
			if tag == cur.ETag {
				if resp, body := serve(h, "GET", "/r", "", map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
					t.Errorf("GET If-None-Match PATCH #%d's ETag: %d %s, want 304", i, resp.StatusCode, body)
				}
			}
		}
		if without != 14 { // the first PATCH alone, then a batch of 15: all but its last
			t.Errorf("%d PATCHes answered without an ETag, want 14: %q", without, etags)
		}
		// What such a client does next: GET the current version and its ETag.
		if resp, _ := serve(h, "GET", "/r", "", nil); resp.Header.Get("ETag") != etaghttp.FormatETag(cur.ETag) {
			t.Errorf("GET answered ETag %q, want the current %q", resp.Header.Get("ETag"), etaghttp.FormatETag(cur.ETag))
		}
	})
}

// A collection GET pages through the documents with ?limit= and a Link
// header (RFC 8288) rel="next"; following the links visits every document
// once, in key order; a tampered page token is 400.
func TestCollectionPaging(t *testing.T) {
	s := etagstore.New[Page](memstore.New(nil), nil)
	for i := range 7 {
		if _, err := s.Create(t.Context(), fmt.Sprintf("p%d", i), Page{Title: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.StripPrefix("/api/pages", etaghttp.Handler(s, nil)))
	defer srv.Close()
	var keys []string
	next := "/api/pages/?limit=3"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("more pages than documents")
		}
		resp, body := do(t, srv, "GET", next, "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", next, resp.StatusCode, body)
		}
		var got struct {
			Documents []struct {
				Key  string `json:"key"`
				ETag string `json:"etag"`
			} `json:"documents"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		for _, d := range got.Documents {
			keys = append(keys, d.Key)
			if d.ETag == "" {
				t.Errorf("%s listed without an ETag", d.Key)
			}
		}
		link := resp.Header.Get("Link")
		switch {
		case got.Next == "" && link != "":
			t.Errorf("last page has a Link %q", link)
		case got.Next != "" && link != "<"+got.Next+`>; rel="next"`:
			t.Errorf("Link = %q, want <%s>; rel=\"next\"", link, got.Next)
		}
		next = ""
		if got.Next != "" {
			next = "/api/pages/" + got.Next
		}
	}
	if want := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}; fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
	for _, bad := range []string{"?limit=0", "?limit=x", "?limit=3&page=garbage"} {
		if resp, body := do(t, srv, "GET", "/api/pages/"+bad, "", nil); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", bad, resp.StatusCode, body)
		}
	}
}

// A deeply nested patch is refused at once, not decoded level by level;
// the collection never lists keys CheckKey refuses; a GET evaluates
// If-Match.
func TestHandlerReviewCases(t *testing.T) {
	s := etagstore.New[Page](memstore.New(nil), nil)
	for _, k := range []string{"open", "secret/x"} {
		if _, err := s.Create(t.Context(), k, Page{Title: k}); err != nil {
			t.Fatal(err)
		}
	}
	opts := &etaghttp.HandlerOptions[Page]{CheckKey: func(k string) error {
		if strings.HasPrefix(k, "secret/") {
			return errors.New("forbidden key")
		}
		return nil
	}}
	srv := httptest.NewServer(http.StripPrefix("/api/pages", etaghttp.Handler(s, opts)))
	defer srv.Close()

	deep := `{"Title":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000) + `}`
	start := time.Now()
	if resp, body := do(t, srv, "PATCH", "/api/pages/open", deep, map[string]string{"If-Match": "*"}); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "deep") {
		t.Errorf("deep patch: %d %s, want 400 refusing the nesting", resp.StatusCode, body)
	}
	t.Logf("deep patch answered in %s", time.Since(start))

	if _, body := do(t, srv, "GET", "/api/pages/?prefix=secret/", "", nil); strings.Contains(body, "secret/x") {
		t.Errorf("the listing shows a key CheckKey refuses: %s", body)
	}

	resp, _ := do(t, srv, "GET", "/api/pages/open", "", nil)
	cur := resp.Header.Get("ETag")
	for _, tc := range []struct {
		path, ifMatch string
		want          int
	}{
		{"/api/pages/open", `"bm9wZQ"`, http.StatusPreconditionFailed},
		{"/api/pages/open", "W/" + cur, http.StatusPreconditionFailed},
		{"/api/pages/open", cur, http.StatusOK},
		{"/api/pages/open", "*", http.StatusOK},
		{"/api/pages/missing", "*", http.StatusPreconditionFailed},
	} {
		if resp, body := do(t, srv, "GET", tc.path, "", map[string]string{"If-Match": tc.ifMatch}); resp.StatusCode != tc.want {
			t.Errorf("GET %s If-Match %s: %d %s, want %d", tc.path, tc.ifMatch, resp.StatusCode, body, tc.want)
		}
	}
}
