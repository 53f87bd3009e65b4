package main

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

// sandboxText is the seeded text of Sandbox.
const sandboxText = "line 1\nline 2\nline 3\nline 4\nline 5\nline 6"

var renameCSRF = regexp.MustCompile(`<form method="post" action="/wiki/[^"]+/rename" id="renameform">\s*<input type="hidden" name="csrf" value="([^"]*)">`)

// rename presses Rename on name's view with to typed in, as a browser
// does, and returns the final status, the final page and the path it
// ended on (redirects followed).
func (e *editor) rename(name, to string) (int, string, string) {
	e.t.Helper()
	view, path := e.get("/wiki/" + name)
	m := renameCSRF.FindStringSubmatch(view)
	if m == nil {
		e.t.Fatalf("no rename form on %s:\n%s", path, view)
	}
	return e.postRename(name, url.Values{"csrf": {html.UnescapeString(m[1])}, "to": {to}})
}

// postRename posts the rename form of name.
func (e *editor) postRename(name string, form url.Values) (int, string, string) {
	e.t.Helper()
	resp, err := e.c.PostForm(e.base+"/wiki/"+name+"/rename", form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Request.URL.Path
}

// get loads path, following redirects, and returns the page and the path
// it ended on.
func (e *editor) get(path string) (string, string) {
	e.t.Helper()
	resp, err := e.c.Get(e.base + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, b)
	}
	return string(b), resp.Request.URL.Path
}

// location requests path without following redirects and returns the
// status and the Location header.
func location(t *testing.T, base, path string) (int, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

func mustGet(t *testing.T, pages *etagstore.Store[Page], name string) etagstore.Doc[Page] {
	t.Helper()
	d, err := pages.Get(t.Context(), name)
	if err != nil {
		t.Fatalf("Get %s: %v", name, err)
	}
	return d
}

// renamed serves the wiki with Sandbox renamed to Playground by e.
func renamed(t *testing.T) (*httptest.Server, *etagstore.Store[Page], *editor) {
	t.Helper()
	srv, pages := newWiki(t)
	e := newEditor(t, srv)
	code, page, path := e.rename("Sandbox", "Playground")
	if code != http.StatusOK || path != "/wiki/Playground" || !strings.Contains(page, "Renamed from Sandbox") {
		t.Fatalf("rename: %d at %s\n%s", code, path, page)
	}
	return srv, pages, e
}

// Renaming writes the page under its new name and a redirect under the
// old one.
func TestRename(t *testing.T) {
	_, pages, _ := renamed(t)
	moved, old := mustGet(t, pages, "Playground"), mustGet(t, pages, "Sandbox")
	if moved.Value.Body != sandboxText || moved.Value.Title != "Playground" || moved.Value.RedirectTo != "" ||
		len(moved.Value.Revisions) != 2 || moved.Value.Revisions[0].Summary != "renamed from Sandbox" {
		t.Errorf("the renamed page: %+v", moved.Value)
	}
	if old.Value.RedirectTo != "Playground" || old.Value.Body != "" || old.Value.Revisions[0].Summary != "renamed to Playground" {
		t.Errorf("the redirect under the old name: %+v", old.Value)
	}
}

// The old name leads to the new one: the view (saying so), the editor and
// the index.
func TestRedirectFollowed(t *testing.T) {
	srv, _, e := renamed(t)
	if code, loc := location(t, srv.URL, "/wiki/Sandbox"); code != http.StatusSeeOther || loc != "/wiki/Playground?from=Sandbox" {
		t.Errorf("GET /wiki/Sandbox: %d to %q, want 303 to /wiki/Playground?from=Sandbox", code, loc)
	}
	page, path := e.get("/wiki/Sandbox")
	if path != "/wiki/Playground" || !strings.Contains(page, "Redirected from Sandbox") || !strings.Contains(page, "line 6") {
		t.Errorf("following /wiki/Sandbox ended at %s:\n%s", path, page)
	}
	if code, loc := location(t, srv.URL, "/wiki/Sandbox/edit"); code != http.StatusSeeOther || loc != "/wiki/Playground/edit" {
		t.Errorf("GET /wiki/Sandbox/edit: %d to %q, want 303 to /wiki/Playground/edit", code, loc)
	}
	if page, _ := e.get("/wiki/Home?from=Sandbox"); strings.Contains(page, "Redirected from") {
		t.Errorf("Home says it was redirected from Sandbox, which does not redirect there")
	}
	if index, _ := e.get("/"); !strings.Contains(index, `Sandbox</a> — renamed to <a href="/wiki/Playground">`) {
		t.Errorf("the index does not show the redirect:\n%s", index)
	}
}

// Renaming back over the redirect the rename left (it points at the page
// renamed) is allowed.
func TestRenameBack(t *testing.T) {
	_, pages, e := renamed(t)
	code, _, path := e.rename("Playground", "Sandbox")
	if code != http.StatusOK || path != "/wiki/Sandbox" {
		t.Fatalf("renaming back: %d at %s", code, path)
	}
	if d := mustGet(t, pages, "Sandbox"); d.Value.Body != sandboxText || d.Value.RedirectTo != "" {
		t.Errorf("renamed back: %+v", d.Value)
	}
	if d := mustGet(t, pages, "Playground"); d.Value.RedirectTo != "Sandbox" {
		t.Errorf("the name renamed back from: %+v", d.Value)
	}
}

// A rename onto an existing page or to a bad name is refused, saying why
// next to the name typed; nothing is written.
func TestRenameRefused(t *testing.T) {
	srv, pages := newWiki(t)
	e := newEditor(t, srv)
	home, sandbox := mustGet(t, pages, "Home"), mustGet(t, pages, "Sandbox")
	for _, c := range []struct {
		to   string
		code int
		says string
	}{
		{"Home", http.StatusConflict, "a page named Home already exists"},
		{"My Page", http.StatusBadRequest, "page names are 1 to 64"},
		{"Sandbox", http.StatusBadRequest, "already called Sandbox"},
	} {
		code, page, _ := e.rename("Sandbox", c.to)
		if code != c.code || !strings.Contains(page, c.says) || !strings.Contains(page, `id="renameerror"`) {
			t.Errorf("rename to %q: %d, want %d saying %q\n%s", c.to, code, c.code, c.says, page)
		}
		if !strings.Contains(page, `id="to" value="`+html.EscapeString(c.to)+`"`) {
			t.Errorf("rename to %q: the name typed is not kept in the form", c.to)
		}
	}
	if mustGet(t, pages, "Home").ETag != home.ETag || mustGet(t, pages, "Sandbox").ETag != sandbox.ETag {
		t.Error("a refused rename wrote")
	}
	if _, err := pages.Get(t.Context(), "My Page"); err == nil {
		t.Errorf("a refused rename created My Page")
	}
}

// A rename without the CSRF token, or of a page renamed since its form
// was loaded, is refused; the JSON API cannot make redirects.
func TestRenameRefusedElsewhere(t *testing.T) {
	srv, pages := newWiki(t)
	e := newEditor(t, srv)
	if code, _, _ := e.postRename("Sandbox", url.Values{"to": {"Elsewhere"}}); code != http.StatusForbidden {
		t.Errorf("rename without the CSRF token: %d, want 403", code)
	}
	if _, err := pages.Get(t.Context(), "Elsewhere"); err == nil {
		t.Errorf("a rename without the CSRF token created Elsewhere")
	}
	view, _ := e.get("/wiki/Sandbox")
	csrf := html.UnescapeString(renameCSRF.FindStringSubmatch(view)[1])
	if code, _, _ := e.rename("Sandbox", "Playground"); code != http.StatusOK {
		t.Fatalf("rename: %d", code)
	}
	code, page, _ := e.postRename("Sandbox", url.Values{"csrf": {csrf}, "to": {"Other"}})
	if code != http.StatusConflict || !strings.Contains(page, "was renamed to Playground meanwhile") {
		t.Errorf("rename of a page renamed meanwhile: %d\n%s", code, page)
	}
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/api/pages/Api_redirect", strings.NewReader(`{"Body":"","RedirectTo":"Home"}`))
	req.Header.Set("If-None-Match", "*")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT of a redirect through the API: %d, want 400", resp.StatusCode)
	}
}

// noCommit is memstore without transactions, as blob storage is.
type noCommit struct{ *memstore.Backend }

func (b noCommit) Abilities() driver.Abilities {
	ab := b.Backend.Abilities()
	ab.Commit, ab.CheckCommit = nil, nil
	return ab
}

// On a backend without transactions (blobs) the rename is refused with a
// message that says why; nothing is written.
func TestRenameWithoutTransactions(t *testing.T) {
	srv, pages := newWikiOn(t, noCommit{memstore.New(nil)})
	e := newEditor(t, srv)
	before := mustGet(t, pages, "Sandbox")
	code, page, _ := e.rename("Sandbox", "Playground")
	if code != http.StatusNotImplemented || !strings.Contains(page, "renaming needs a backend with transactions") {
		t.Errorf("rename without transactions: %d\n%s", code, page)
	}
	if mustGet(t, pages, "Sandbox").ETag != before.ETag {
		t.Error("the refused rename wrote Sandbox")
	}
	if _, err := pages.Get(t.Context(), "Playground"); err == nil {
		t.Error("the refused rename wrote Playground")
	}
}

// commitHook is memstore running before ahead of each Commit (each
// transaction's commit).
type commitHook struct {
	*memstore.Backend
	before func()
}

func (b commitHook) Abilities() driver.Abilities {
	ab := b.Backend.Abilities()
	commit := ab.Commit
	ab.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
		b.before()
		return commit(ctx, actions)
	}
	return ab
}

// An edit saved while the rename is in flight — after it read the page,
// before it committed — is not lost: the rename's commit fails on the
// page's new version, and the rename runs again and moves the edited
// page.
func TestRenameRacesAnEdit(t *testing.T) {
	var commits atomic.Int32
	var editCode atomic.Int32
	var e *editor
	var edited string
	srv, pages := newWikiOn(t, commitHook{memstore.New(nil), func() {
		if commits.Add(1) == 1 { // between the rename's reads and its commit
			code, _ := e.save("Sandbox", edited, nil)
			editCode.Store(int32(code))
		}
	}})
	e = newEditor(t, srv)
	edited = strings.Replace(e.open("Sandbox"), "line 4", "line 4, saved during the rename", 1)
	code, page, path := newEditor(t, srv).rename("Sandbox", "Playground")
	if code != http.StatusOK || path != "/wiki/Playground" {
		t.Fatalf("rename: %d at %s\n%s", code, path, page)
	}
	if editCode.Load() != http.StatusOK {
		t.Fatalf("the edit during the rename: %d", editCode.Load())
	}
	if n := commits.Load(); n != 2 {
		t.Errorf("%d commits, want 2: the first fails on the edit, the second moves the edited page", n)
	}
	if d := mustGet(t, pages, "Playground"); d.Value.Body != edited {
		t.Errorf("the renamed page lost the edit saved during the rename:\n%s", d.Value.Body)
	}
	if d := mustGet(t, pages, "Sandbox"); d.Value.RedirectTo != "Playground" {
		t.Errorf("the old name: %+v", d.Value)
	}
}

// An editor opened before the rename saves after it: the edit goes to the
// renamed page (merged with what was saved there meanwhile), and the
// redirect stays. "Overwrite anyway" goes there too.
func TestSaveAfterRename(t *testing.T) {
	srv, pages := newWiki(t)
	late, other, overwriter := newEditor(t, srv), newEditor(t, srv), newEditor(t, srv)
	mine := strings.Replace(late.open("Sandbox"), "line 2", "line 2, edited before the rename", 1)
	overwriter.open("Sandbox")
	if code, _, _ := newEditor(t, srv).rename("Sandbox", "Playground"); code != http.StatusOK {
		t.Fatalf("rename: %d", code)
	}
	theirs := strings.Replace(other.open("Playground"), "line 5", "line 5, edited after the rename", 1)
	if code, _ := other.save("Playground", theirs, nil); code != http.StatusOK {
		t.Fatalf("the edit after the rename: %d", code)
	}
	code, page := late.save("Sandbox", mine, nil)
	if code != http.StatusOK || !strings.Contains(page, "The page you edited, Sandbox, was renamed to Playground meanwhile") ||
		!strings.Contains(page, "merged with changes saved meanwhile by tester") {
		t.Fatalf("save after the rename: %d\n%s", code, page)
	}
	want := strings.Replace(theirs, "line 2", "line 2, edited before the rename", 1)
	if d := mustGet(t, pages, "Playground"); d.Value.Body != want {
		t.Errorf("the renamed page:\n%s\nwant both edits:\n%s", d.Value.Body, want)
	}
	if d := mustGet(t, pages, "Sandbox"); d.Value.RedirectTo != "Playground" {
		t.Errorf("the save replaced the redirect: %+v", d.Value)
	}
	code, _ = overwriter.save("Sandbox", "overwritten", url.Values{"action": {"overwrite"}})
	if d := mustGet(t, pages, "Playground"); code != http.StatusOK || d.Value.Body != "overwritten" {
		t.Errorf("overwrite after the rename: %d, Playground holds:\n%s", code, d.Value.Body)
	}
	if d := mustGet(t, pages, "Sandbox"); d.Value.RedirectTo != "Playground" {
		t.Errorf("the overwrite replaced the redirect: %+v", d.Value)
	}
}
