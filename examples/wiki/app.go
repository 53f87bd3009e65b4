package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log"
	"net/http"
	"net/url"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
)

// maxFormBytes bounds a request body: an edit form carries the page's text
// twice (the base it started from and the edit), URL-encoded, and a page
// on tables may hold up to 1 MiB (a split Body).
const maxFormBytes = 4 << 20

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
	a.mux.HandleFunc("POST /wiki/{name}/rename", a.rename)
	a.mux.Handle("/api/pages/", http.StripPrefix("/api/pages", etaghttp.Handler(pages, &etaghttp.HandlerOptions[Page]{
		MaxBodyBytes: maxFormBytes, CheckKey: checkName, Prepare: a.prepareAPI})))
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
		_, err := a.pages.Create(ctx, name, a.revise(Page{}, name, "", body, "seed", "created"))
		if err != nil && !errors.Is(err, etagstore.ErrExists) {
			return err
		}
	}
	return nil
}

// indexPageSize is how many pages the index lists at a time.
const indexPageSize = 50

// index lists the pages, indexPageSize at a time, with a link to the next
// ones (?page= carries the Store's opaque page token).
func (a *App) index(w http.ResponseWriter, r *http.Request) {
	p, err := a.pages.Page(r.Context(), "", indexPageSize, r.URL.Query().Get("page"))
	if errors.Is(err, etagstore.ErrInvalidInput) {
		http.Error(w, "that page of the index does not exist", http.StatusBadRequest)
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	next := ""
	if p.Next != "" {
		next = "/?" + url.Values{"page": {p.Next}}.Encode()
	}
	a.render(w, http.StatusOK, "index", map[string]any{"Pages": p.Docs, "Next": next})
}

func (a *App) name(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := checkName(name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "", false
	}
	return name, true
}

// viewData is what a page's view shows.
type viewData struct {
	Name  string
	Page  Page
	Flash flash  // the message after a save or a rename
	From  string // the redirect's name the reader came through
	CSRF  string // for the rename form
	// A refused rename: the name typed, and why.
	RenameTo, RenameError string
}

// view shows a page; a redirect's name (a page renamed) goes to the page
// it names, and a missing page to its editor.
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
	if d.Value.RedirectTo != "" {
		redirectTo(w, r, d.Value.RedirectTo, "", name)
		return
	}
	a.render(w, http.StatusOK, "view", viewData{Name: name, Page: d.Value, Flash: takeFlash(w, r, name),
		From: a.redirectedFrom(r.Context(), r, name), CSRF: a.csrfToken(w, r)})
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

func (a *App) editForm(w http.ResponseWriter, r *http.Request) {
	name, ok := a.name(w, r)
	if !ok {
		return
	}
	data := editData{Name: name, Title: name, CSRF: a.csrfToken(w, r), Author: authorCookie(r)}
	d, err := a.pages.Get(r.Context(), name)
	switch {
	case err == nil && d.Value.RedirectTo != "": // renamed: edit the page under its new name
		redirectTo(w, r, d.Value.RedirectTo, "/edit", "")
		return
	case err == nil:
		data.Title, data.Body = d.Value.Title, d.Value.Body
		data.BaseETag, data.BaseBody = etaghttp.FormatETag(d.ETag), d.Value.Body
	case !errors.Is(err, etagstore.ErrNotFound):
		a.fail(w, err)
		return
	}
	a.render(w, http.StatusOK, "edit", data)
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
	case errors.Is(err, etagstore.ErrOutcomeUnknown):
		http.Error(w, "the storage service's answer was lost: your save may or may not have been applied; open the page to check (use Back to get your text)", http.StatusServiceUnavailable)
	case errors.Is(err, etagstore.ErrConflict):
		http.Error(w, "the page keeps changing; reload the editor", http.StatusConflict)
	case errors.Is(err, errRedirectLoop):
		http.Error(w, "the page redirects too many times in a row: nothing was saved (use Back to get your text)", http.StatusLoopDetected)
	default:
		http.Error(w, "storage error", http.StatusInternalServerError)
	}
}
