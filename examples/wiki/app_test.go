package main

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

func newWiki(t *testing.T) (*httptest.Server, *etagstore.Store[Page]) {
	t.Helper()
	return newWikiOn(t, memstore.New(nil))
}

// newWikiOn serves the wiki, seeded, on backend b.
func newWikiOn(t *testing.T, b driver.Backend) (*httptest.Server, *etagstore.Store[Page]) {
	t.Helper()
	pages := etagstore.New[Page](b, nil)
	app := NewApp(pages)
	if err := app.Seed(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	return srv, pages
}

// editor is one browser-like session: a cookie jar and the last edit form.
type editor struct {
	t      *testing.T
	c      *http.Client
	base   string
	fields url.Values
}

func newEditor(t *testing.T, srv *httptest.Server) *editor {
	jar, _ := cookiejar.New(nil)
	c := *srv.Client() // a copy: srv.Client() is one client, and each editor has cookies of its own
	c.Jar = jar
	return &editor{t: t, c: &c, base: srv.URL}
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`)

// open loads the edit form of a page and keeps its hidden fields.
func (e *editor) open(name string) string {
	e.t.Helper()
	resp, err := e.c.Get(e.base + "/wiki/" + name + "/edit")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	e.fields = url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(string(b), -1) {
		if _, seen := e.fields[m[1]]; !seen { // the first form's fields
			e.fields.Set(m[1], html.UnescapeString(m[2]))
		}
	}
	body := regexp.MustCompile(`(?s)<textarea name="body" id="body" rows="18">(.*?)</textarea>`).FindStringSubmatch(string(b))
	if body == nil {
		e.t.Fatalf("no editor in %s", b)
	}
	return html.UnescapeString(body[1])
}

// save posts text with the form's fields and returns the final status and page.
func (e *editor) save(name, text string, extra url.Values) (int, string) {
	e.t.Helper()
	form := url.Values{}
	for k, v := range e.fields {
		form[k] = v
	}
	form.Set("body", text)
	form.Set("author", "tester")
	for k, v := range extra {
		form[k] = v
	}
	resp, err := e.c.PostForm(e.base+"/wiki/"+name+"/edit", form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEditFlow(t *testing.T) {
	srv, pages := newWiki(t)
	a, b := newEditor(t, srv), newEditor(t, srv)
	textA, textB := a.open("Sandbox"), b.open("Sandbox")

	// Disjoint edits: both kept, and B is told about the merge.
	if code, _ := a.save("Sandbox", strings.Replace(textA, "line 1", "line 1 (A)", 1), nil); code != 200 {
		t.Fatalf("A's save: %d", code)
	}
	code, page := b.save("Sandbox", strings.Replace(textB, "line 6", "line 6 (B)", 1), nil)
	if code != 200 || !strings.Contains(page, "merged with changes saved meanwhile") {
		t.Fatalf("B's save: %d\n%s", code, page)
	}
	d, _ := pages.Get(t.Context(), "Sandbox")
	if !strings.Contains(d.Value.Body, "line 1 (A)") || !strings.Contains(d.Value.Body, "line 6 (B)") {
		t.Fatalf("stored body lost an edit:\n%s", d.Value.Body)
	}
	if len(d.Value.Revisions) != 3 {
		t.Errorf("history has %d revisions, want the seed's and two saves", len(d.Value.Revisions))
	}

	// Overlapping edits: conflict page with both texts; nothing overwritten.
	textA, textB = a.open("Sandbox"), b.open("Sandbox")
	a.save("Sandbox", strings.Replace(textA, "line 2", "A's line 2", 1), nil)
	mineB := strings.Replace(textB, "line 2", "B's line 2", 1)
	code, page = b.save("Sandbox", mineB, nil)
	if code != http.StatusConflict || !strings.Contains(page, "A&#39;s line 2") || !strings.Contains(page, "B&#39;s line 2") {
		t.Fatalf("overlapping save: %d\n%s", code, page)
	}
	d, _ = pages.Get(t.Context(), "Sandbox")
	if strings.Contains(d.Value.Body, "B's line 2") {
		t.Fatal("the conflicting save overwrote the page")
	}
	// Overwrite anyway: B's text wins, deliberately.
	code, _ = b.save("Sandbox", mineB, url.Values{"action": {"overwrite"}})
	d, _ = pages.Get(t.Context(), "Sandbox")
	if code != 200 || d.Value.Body != mineB {
		t.Fatalf("overwrite: %d, stored:\n%s", code, d.Value.Body)
	}
}

func TestSecurity(t *testing.T) {
	srv, pages := newWiki(t)
	e := newEditor(t, srv)
	e.open("Xss")
	if code, _ := e.save("Xss", `<script>alert("x")</script>`, nil); code != 200 {
		t.Fatalf("save: %d", code)
	}
	resp, err := e.c.Get(srv.URL + "/wiki/Xss")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "<script>") || !strings.Contains(string(b), "&lt;script&gt;") {
		t.Fatalf("the page's script is not escaped:\n%s", b)
	}
	if resp.Header.Get("Content-Security-Policy") == "" {
		t.Error("no Content-Security-Policy header")
	}
	// No CSRF token, or a wrong one: refused, nothing written.
	before, _ := pages.Get(t.Context(), "Xss")
	for _, token := range []string{"", "0123456789abcdef0123456789abcdef"} {
		code, _ := e.save("Xss", "defaced", url.Values{"csrf": {token}})
		if code != http.StatusForbidden {
			t.Errorf("save with CSRF token %q: %d, want 403", token, code)
		}
	}
	// Too large a form.
	if code, _ := e.save("Xss", strings.Repeat("x", maxFormBytes+1), nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("huge save: %d, want 413", code)
	}
	after, _ := pages.Get(t.Context(), "Xss")
	if after.ETag != before.ETag {
		t.Error("a refused save changed the page")
	}
	// Bad page names.
	if resp, _ := e.c.Get(srv.URL + "/wiki/..%2Fetc/edit"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad name: %d", resp.StatusCode)
	}
}

// The index lists the pages indexPageSize at a time; following "More
// pages" visits every page once; a forged page token is 400.
func TestIndexPages(t *testing.T) {
	srv, pages := newWiki(t)
	app := NewApp(pages)
	for i := range indexPageSize + 5 {
		name := fmt.Sprintf("P%03d", i)
		if _, err := pages.Create(t.Context(), name, app.revise(Page{}, name, "", "text", "test", "created")); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	next := srv.URL + "/"
	link := regexp.MustCompile(`<a id="next" rel="next" href="([^"]+)">`)
	entry := regexp.MustCompile(`<li><a href="/wiki/([^"]+)">`)
	for hops := 0; next != ""; hops++ {
		if hops > 3 {
			t.Fatal("the index never ends")
		}
		resp, err := srv.Client().Get(next)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range entry.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]]++
		}
		next = ""
		if m := link.FindStringSubmatch(string(b)); m != nil {
			next = srv.URL + html.UnescapeString(m[1])
		}
	}
	// The seeded pages and the ones created here, each once.
	if len(seen) != indexPageSize+5+2 {
		t.Errorf("%d pages listed, want %d", len(seen), indexPageSize+5+2)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", name, n)
		}
	}
	resp, err := srv.Client().Get(srv.URL + "/?page=forged")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a forged page token: %d, want 400", resp.StatusCode)
	}
}
