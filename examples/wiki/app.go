package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
)

// Page is a wiki page as stored.
type Page struct {
	Title     string
	Body      string
	Author    string
	Updated   time.Time
	Revisions []Revision // newest first, at most maxRevisions
}

// Revision records one save.
type Revision struct {
	At      time.Time
	Author  string
	Summary string
}

const (
	maxRevisions = 20
	maxFormBytes = 256 << 10
)

var pageName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// App is the wiki's HTTP handler.
type App struct {
	pages *etagstore.Store[Page]
	mux   *http.ServeMux
	now   func() time.Time
}

// NewApp returns the wiki on pages.
func NewApp(pages *etagstore.Store[Page]) *App {
	a := &App{pages: pages, mux: http.NewServeMux(), now: time.Now}
	a.mux.HandleFunc("GET /{$}", a.index)
	a.mux.HandleFunc("GET /wiki/{name}", a.view)
	a.mux.HandleFunc("GET /wiki/{name}/edit", a.editForm)
	a.mux.HandleFunc("POST /wiki/{name}/edit", a.save)
	a.mux.HandleFunc("GET /wiki/{name}/history", a.history)
	a.mux.Handle("/api/pages/", http.StripPrefix("/api/pages", etaghttp.Handler(pages, &etaghttp.HandlerOptions{MaxBodyBytes: maxFormBytes})))
	return a
}

func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	a.mux.ServeHTTP(w, r)
}

// Seed creates the demo pages when they are missing.
func (a *App) Seed(ctx context.Context) error {
	for name, body := range map[string]string{
		"Home":    "Welcome to the etagstore wiki.\n\nEvery save is a conditional write (If-Match).\nOpen this page's editor in two tabs, change different lines in each and save both:\nthe second save is merged, not lost.\nChange the same line in both and you get a conflict page that keeps your text.",
		"Sandbox": "line 1\nline 2\nline 3\nline 4\nline 5\nline 6",
	} {
		now := a.now().UTC().Truncate(time.Second)
		_, err := a.pages.Create(ctx, name, Page{Title: name, Body: body, Author: "seed", Updated: now,
			Revisions: []Revision{{At: now, Author: "seed", Summary: "created"}}})
		if err != nil && !errors.Is(err, etagstore.ErrExists) {
			return err
		}
	}
	return nil
}

func (a *App) index(w http.ResponseWriter, r *http.Request) {
	var pages []etagstore.Doc[Page]
	for d, err := range a.pages.List(r.Context(), "") {
		if err != nil {
			a.fail(w, err)
			return
		}
		pages = append(pages, d)
	}
	a.render(w, http.StatusOK, "index", map[string]any{"Pages": pages})
}

func (a *App) name(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if !pageName.MatchString(name) {
		http.Error(w, "page names are 1 to 64 letters, digits, '-' or '_'", http.StatusBadRequest)
		return "", false
	}
	return name, true
}

func (a *App) view(w http.ResponseWriter, r *http.Request) {
	name, ok := a.name(w, r)
	if !ok {
		return
	}
	d, err := a.pages.Get(r.Context(), name)
	if errors.Is(err, etagstore.ErrNotFound) {
		http.Redirect(w, r, "/wiki/"+name+"/edit", http.StatusSeeOther)
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	q := r.URL.Query()
	a.render(w, http.StatusOK, "view", map[string]any{"Name": name, "Page": d.Value, "Saved": q.Has("saved"), "Merged": q.Get("merged")})
}

func (a *App) history(w http.ResponseWriter, r *http.Request) {
	name, ok := a.name(w, r)
	if !ok {
		return
	}
	d, err := a.pages.Get(r.Context(), name)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.render(w, http.StatusOK, "history", map[string]any{"Name": name, "Page": d.Value})
}

// editData is what the edit and conflict pages show.
type editData struct {
	Name, Title, Body, Author string
	BaseETag, BaseBody        string // the version the edit started from
	CSRF                      string
	// Conflict page only:
	Conflict     bool
	Mine, Theirs string
	TheirsAuthor string
	Diff         []string
}

func (a *App) editForm(w http.ResponseWriter, r *http.Request) {
	name, ok := a.name(w, r)
	if !ok {
		return
	}
	data := editData{Name: name, Title: name, CSRF: a.csrfToken(w, r), Author: authorCookie(r)}
	d, err := a.pages.Get(r.Context(), name)
	switch {
	case err == nil:
		data.Title, data.Body = d.Value.Title, d.Value.Body
		data.BaseETag, data.BaseBody = etaghttp.FormatETag(d.ETag), d.Value.Body
	case !errors.Is(err, etagstore.ErrNotFound):
		a.fail(w, err)
		return
	}
	a.render(w, http.StatusOK, "edit", data)
}

// save is the wiki-style save: If-Match of the version the editor started
// from; on 412 a line merge of base, mine and theirs; overlapping edits get
// the conflict page, which keeps the editor's text; "overwrite anyway" is
// the explicit last-writer-wins opt-out (ETagAny).
func (a *App) save(w http.ResponseWriter, r *http.Request) {
	name, ok := a.name(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "form too large or malformed", http.StatusRequestEntityTooLarge)
		return
	}
	if !a.csrfOK(r) {
		http.Error(w, "missing or wrong CSRF token: reload the editor", http.StatusForbidden)
		return
	}
	author := strings.TrimSpace(r.PostFormValue("author"))
	if author == "" {
		author = "anonymous"
	}
	http.SetCookie(w, &http.Cookie{Name: "author", Value: url.QueryEscape(author), Path: "/", SameSite: http.SameSiteStrictMode, HttpOnly: true})
	mine := strings.ReplaceAll(r.PostFormValue("body"), "\r\n", "\n")
	base := strings.ReplaceAll(r.PostFormValue("base_body"), "\r\n", "\n")
	page := func(body, summary string) Page {
		return Page{Title: name, Body: body, Author: author, Updated: a.now().UTC().Truncate(time.Second),
			Revisions: []Revision{{At: a.now().UTC().Truncate(time.Second), Author: author, Summary: summary}}}
	}
	ctx := r.Context()

	if r.PostFormValue("action") == "overwrite" {
		_, err := a.pages.Update(ctx, name, func(p *Page) error {
			*p = withHistory(page(mine, "overwrote concurrent changes"), p.Revisions)
			return nil
		}, etagstore.CreateIfMissing())
		if err != nil {
			a.fail(w, err)
			return
		}
		http.Redirect(w, r, "/wiki/"+name+"?saved=1", http.StatusSeeOther)
		return
	}

	var held etagstore.ETag
	if tag := r.PostFormValue("base_etag"); tag != "" {
		var err error
		if held, err = etaghttp.ParseETag(tag); err != nil {
			http.Error(w, "bad base version", http.StatusBadRequest)
			return
		}
	}
	for range 3 { // each round: write if held is current, else merge with theirs
		cur, err := a.pages.Get(ctx, name)
		missing := errors.Is(err, etagstore.ErrNotFound)
		if err != nil && !missing {
			a.fail(w, err)
			return
		}
		theirs := cur
		switch {
		case held == "" && missing:
			_, err = a.pages.Create(ctx, name, page(mine, "created"))
		case held != "" && missing:
			err = etagstore.ErrNotFound // deleted meanwhile: the overwrite button recreates it
		case cur.ETag == held:
			_, err = a.pages.Replace(ctx, etagstore.Doc[Page]{Key: name, Value: withHistory(page(mine, summary(base, mine)), cur.Value.Revisions), ETag: held})
		default:
			err = &etagstore.ConflictError[Page]{Key: name, ETag: held, Theirs: cur}
		}
		var ce *etagstore.ConflictError[Page]
		switch {
		case err == nil:
			if by := r.PostFormValue("merged_from"); by != "" {
				http.Redirect(w, r, "/wiki/"+name+"?merged="+url.QueryEscape(by), http.StatusSeeOther)
				return
			}
			http.Redirect(w, r, "/wiki/"+name+"?saved=1", http.StatusSeeOther)
			return
		case errors.As(err, &ce):
			theirs = ce.Theirs
		case errors.Is(err, etagstore.ErrExists):
			continue // created meanwhile: the next round reads and merges
		default:
			a.fail(w, err)
			return
		}
		merged, conflicts := merge3(lines(base), lines(mine), lines(theirs.Value.Body))
		if conflicts > 0 {
			a.render(w, http.StatusConflict, "edit", editData{
				Name: name, Title: name, Author: author, CSRF: a.csrfToken(w, r),
				Body: strings.Join(merged, "\n"), BaseETag: etaghttp.FormatETag(theirs.ETag), BaseBody: theirs.Value.Body,
				Conflict: true, Mine: mine, Theirs: theirs.Value.Body, TheirsAuthor: theirs.Value.Author,
				Diff: diffLines(lines(theirs.Value.Body), lines(mine)),
			})
			return
		}
		// Non-overlapping edits: save the merge on top of theirs.
		base, mine, held = theirs.Value.Body, strings.Join(merged, "\n"), theirs.ETag
		r.PostForm.Set("merged_from", theirs.Value.Author)
	}
	http.Error(w, "the page keeps changing; reload the editor", http.StatusConflict)
}

func withHistory(p Page, prior []Revision) Page {
	p.Revisions = append(p.Revisions, prior...)
	if len(p.Revisions) > maxRevisions {
		p.Revisions = p.Revisions[:maxRevisions]
	}
	return p
}

func summary(base, mine string) string {
	d := diffLines(lines(base), lines(mine))
	plus, minus := 0, 0
	for _, l := range d {
		switch l[0] {
		case '+':
			plus++
		case '-':
			minus++
		}
	}
	return fmt.Sprintf("+%d −%d lines", plus, minus)
}

// csrfToken returns the double-submit CSRF token, setting its cookie if
// the browser has none.
func (a *App) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie("csrf"); err == nil && len(c.Value) == 32 {
		return c.Value
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: "csrf", Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return tok
}

func (a *App) csrfOK(r *http.Request) bool {
	c, err := r.Cookie("csrf")
	form := r.PostFormValue("csrf")
	return err == nil && form != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) == 1
}

func authorCookie(r *http.Request) string {
	if c, err := r.Cookie("author"); err == nil {
		if v, err := url.QueryUnescape(c.Value); err == nil {
			return v
		}
	}
	return ""
}

func (a *App) fail(w http.ResponseWriter, err error) {
	log.Printf("wiki: %v", err)
	switch {
	case errors.Is(err, etagstore.ErrNotFound):
		http.Error(w, "no such page", http.StatusNotFound)
	case errors.Is(err, etagstore.ErrTooLarge):
		http.Error(w, "the page is too large", http.StatusRequestEntityTooLarge)
	case errors.Is(err, etagstore.ErrInvalidKey):
		http.Error(w, "bad page name", http.StatusBadRequest)
	default:
		http.Error(w, "storage error", http.StatusInternalServerError)
	}
}

func (a *App) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := templates.ExecuteTemplate(w, name, data); err != nil {
		log.Printf("wiki: render %s: %v", name, err)
	}
}

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"when": func(t time.Time) string { return t.Format("2006-01-02 15:04 UTC") },
}).Parse(`
{{define "head"}}<!doctype html><html><head><meta charset="utf-8"><title>{{.}} · etagstore wiki</title>
<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}pre,textarea{font-family:monospace;font-size:14px}
textarea{width:100%}.note{background:#eef;padding:.5em}.warn{background:#fed;padding:.5em}.cols{display:flex;gap:1em}.cols>div{flex:1}
pre.text{white-space:pre-wrap;border:1px solid #ccc;padding:.5em}.del{color:#a00}.add{color:#070}</style></head><body>
<p><a href="/">All pages</a></p>{{end}}
{{define "foot"}}</body></html>{{end}}

{{define "index"}}{{template "head" "Pages"}}<h1>Pages</h1><ul>
{{range .Pages}}<li><a href="/wiki/{{.Key}}">{{.Value.Title}}</a> — {{.Value.Author}}, {{when .Value.Updated}}</li>{{end}}</ul>
<p>JSON API: <code>/api/pages/{name}</code> (GET, PUT with If-Match, PATCH, DELETE).</p>{{template "foot"}}{{end}}

{{define "view"}}{{template "head" .Page.Title}}<h1 id="title">{{.Page.Title}}</h1>
{{if .Merged}}<p class="note" id="flash">Saved. Your edit was merged with changes saved meanwhile by {{.Merged}}.</p>{{else if .Saved}}<p class="note" id="flash">Saved.</p>{{end}}
<pre class="text" id="content">{{.Page.Body}}</pre>
<p>Last edited by {{.Page.Author}}, {{when .Page.Updated}} · <a id="edit" href="/wiki/{{.Name}}/edit">Edit</a> · <a href="/wiki/{{.Name}}/history">History</a></p>{{template "foot"}}{{end}}

{{define "history"}}{{template "head" .Page.Title}}<h1>History of {{.Page.Title}}</h1><ol>
{{range .Page.Revisions}}<li>{{when .At}} — {{.Author}}: {{.Summary}}</li>{{end}}</ol>{{template "foot"}}{{end}}

{{define "edit"}}{{template "head" .Title}}<h1>Editing {{.Title}}</h1>
{{if .Conflict}}<div class="warn" id="conflict"><p><b>Someone else ({{.TheirsAuthor}}) saved this page while you were editing, and changed the same lines.</b>
Nothing of yours was lost: your text is below, next to theirs. The box holds a merged draft with both versions of the overlapping lines marked; fix it and save, or overwrite their version with yours.</p></div>
<div class="cols"><div><h3>Saved meanwhile (theirs)</h3><pre class="text" id="theirs">{{.Theirs}}</pre></div>
<div><h3>Your edit (mine)</h3><pre class="text" id="mine">{{.Mine}}</pre></div></div>
<h3>Changes from theirs to yours</h3><pre class="text" id="diff">{{range .Diff}}{{if eq (slice . 0 1) "-"}}<span class="del">{{.}}</span>{{else if eq (slice . 0 1) "+"}}<span class="add">{{.}}</span>{{else}}{{.}}{{end}}
{{end}}</pre>{{end}}
<form method="post" action="/wiki/{{.Name}}/edit" id="editform">
<input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="base_etag" value="{{.BaseETag}}">
<input type="hidden" name="base_body" value="{{.BaseBody}}">
<p><label>Your name <input name="author" id="author" value="{{.Author}}"></label></p>
<textarea name="body" id="body" rows="18">{{.Body}}</textarea>
<p><button type="submit" id="save">Save</button></p></form>
{{if .Conflict}}<form method="post" action="/wiki/{{.Name}}/edit" id="overwriteform">
<input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="action" value="overwrite">
<input type="hidden" name="author" value="{{.Author}}"><input type="hidden" name="body" value="{{.Mine}}">
<p><button type="submit" id="overwrite">Overwrite anyway with my text</button> (replaces the version saved meanwhile)</p></form>{{end}}
{{template "foot"}}{{end}}
`))
