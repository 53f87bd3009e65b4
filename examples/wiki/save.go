package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
)

// This file is the wiki-style save: If-Match of the version the editor
// started from; on 412 a line merge of base, mine and theirs; overlapping
// edits, and a page deleted meanwhile, get a conflict page that keeps the
// editor's text; "overwrite anyway" is the explicit last-writer-wins
// opt-out (Update). Whatever button is pressed, the text saved is the
// text in the box, and never one holding unresolved conflict markers.

// Conflict states of the edit page, carried by its hidden field
// "conflict" so that a refused save keeps the choices it offered.
const (
	stateChanged = "changed" // saved meanwhile by someone else, same lines
	stateDeleted = "deleted" // deleted meanwhile
)

// saveForm is what the edit form posts.
type saveForm struct {
	author, mine, base string
	baseTag            string         // the version the edit started from, as an entity tag
	held               etagstore.ETag // baseTag decoded; "" for a new page
	state              string         // stateChanged or stateDeleted, from a conflict page
	overwrite          bool
}

// editData is what the edit page shows, in each of its states.
type editData struct {
	Name, Title, Body, Author string
	BaseETag, BaseBody        string // the version the edit started from
	CSRF                      string
	State                     string // "", stateChanged or stateDeleted
	Markers                   []int  // refused: lines holding conflict markers
	// stateChanged only:
	Mine, Theirs, TheirsAuthor string
	Diff                       []string
}

func (a *App) save(w http.ResponseWriter, r *http.Request) {
	name, ok := a.name(w, r)
	if !ok {
		return
	}
	f, ok := a.readForm(w, r)
	if !ok {
		return
	}
	switch {
	case len(markerLines(f.mine)) > 0:
		a.refuseMarkers(w, r, name, f)
	case f.overwrite:
		a.overwrite(w, r, name, f)
	default:
		a.saveMerged(w, r, name, f)
	}
}

// readForm parses and checks the posted form, or answers the request.
func (a *App) readForm(w http.ResponseWriter, r *http.Request) (saveForm, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "form too large or malformed", http.StatusRequestEntityTooLarge)
		return saveForm{}, false
	}
	if !a.csrfOK(r) {
		http.Error(w, "missing or wrong CSRF token: reload the editor", http.StatusForbidden)
		return saveForm{}, false
	}
	f := saveForm{
		author:    strings.TrimSpace(r.PostFormValue("author")),
		mine:      strings.ReplaceAll(r.PostFormValue("body"), "\r\n", "\n"),
		base:      strings.ReplaceAll(r.PostFormValue("base_body"), "\r\n", "\n"),
		baseTag:   r.PostFormValue("base_etag"),
		overwrite: r.PostFormValue("action") == "overwrite",
	}
	if s := r.PostFormValue("conflict"); s == stateChanged || s == stateDeleted {
		f.state = s
	}
	if f.author == "" {
		f.author = "anonymous"
	}
	http.SetCookie(w, &http.Cookie{Name: "author", Value: url.QueryEscape(f.author), Path: "/", SameSite: http.SameSiteStrictMode, HttpOnly: true})
	if f.baseTag != "" {
		var err error
		if f.held, err = etaghttp.ParseETag(f.baseTag); err != nil {
			http.Error(w, "bad base version", http.StatusBadRequest)
			return saveForm{}, false
		}
	}
	return f, true
}

// refuseMarkers answers a save whose text still holds conflict markers:
// nothing is written, the text stays in the box, and the page says why.
func (a *App) refuseMarkers(w http.ResponseWriter, r *http.Request, name string, f saveForm) {
	a.render(w, http.StatusUnprocessableEntity, "edit", editData{
		Name: name, Title: name, Body: f.mine, Author: f.author, CSRF: a.csrfToken(w, r),
		BaseETag: f.baseTag, BaseBody: f.base, State: f.state, Markers: markerLines(f.mine),
	})
}

// overwrite saves the text in the box over whatever version is stored,
// recreating the page if it was deleted: the deliberate opt-out. A page
// renamed meanwhile is overwritten under its new name.
func (a *App) overwrite(w http.ResponseWriter, r *http.Request, name string, f saveForm) {
	edited := name
	for range maxRedirects + 1 {
		next := ""
		_, err := a.pages.Update(r.Context(), name, func(p *Page) error {
			if next = p.RedirectTo; next != "" {
				return errRedirect
			}
			*p = a.revise(*p, name, p.Title, f.mine, f.author, "overwrote concurrent changes")
			return nil
		}, etagstore.CreateIfMissing())
		if errors.Is(err, errRedirect) {
			name = next // renamed: overwrite the page it was renamed to
			continue
		}
		if err != nil {
			a.fail(w, err)
			return
		}
		a.saved(w, r, name, flash{Renamed: renamedFrom(edited, name)})
		return
	}
	a.fail(w, errRedirectLoop)
}

// errRedirect stops an overwrite's Update at a redirect, which it follows.
var errRedirect = errors.New("a redirect")

// renamedFrom is the name an edit was made on, when it was saved under
// another name (the page was renamed meanwhile); "" otherwise.
func renamedFrom(edited, saved string) string {
	if edited == saved {
		return ""
	}
	return edited
}

// saveMerged writes the text if the page is still at the version the edit
// started from; otherwise it merges the edit with the version saved
// meanwhile and writes that, or shows the conflict page. A page renamed
// meanwhile is saved under its new name, merged with what is stored there.
func (a *App) saveMerged(w http.ResponseWriter, r *http.Request, name string, f saveForm) {
	ctx := r.Context()
	edited := name
	var fl flash
	for range 3 { // each round: write if held is current, else merge with theirs
		target, cur, err := a.follow(ctx, name)
		if target != name { // renamed: the version held is the old name's
			name, f.held = target, ""
		}
		missing := errors.Is(err, etagstore.ErrNotFound)
		if err != nil && !missing {
			a.fail(w, err)
			return
		}
		switch {
		case f.held != "" && missing:
			a.conflictDeleted(w, r, name, f)
			return
		case f.held == "" && missing:
			_, err = a.pages.Create(ctx, name, a.revise(Page{}, name, "", f.mine, f.author, "created"))
		case cur.ETag == f.held:
			_, err = a.pages.Replace(ctx, etagstore.Doc[Page]{Key: name, ETag: f.held,
				Value: a.revise(cur.Value, name, cur.Value.Title, f.mine, f.author, summary(f.base, f.mine))})
		default:
			err = &etagstore.ConflictError[Page]{Key: name, ETag: f.held, Theirs: cur}
		}
		var ce *etagstore.ConflictError[Page]
		switch {
		case err == nil:
			fl.Renamed = renamedFrom(edited, name)
			a.saved(w, r, name, fl)
			return
		case errors.Is(err, etagstore.ErrExists):
			continue // created meanwhile: the next round reads and merges
		case !errors.As(err, &ce):
			a.fail(w, err)
			return
		}
		theirs := ce.Theirs
		merged, conflicts := merge3(lines(f.base), lines(f.mine), lines(theirs.Value.Body))
		if conflicts > 0 {
			a.conflictChanged(w, r, name, f, theirs, strings.Join(merged, "\n"))
			return
		}
		// Non-overlapping edits: save the merge on top of theirs.
		fl.Merged = mergedWith(f.base, theirs.Value, fl.Merged)
		f.base, f.mine, f.held = theirs.Value.Body, strings.Join(merged, "\n"), theirs.ETag
	}
	http.Error(w, "the page keeps changing; reload the editor", http.StatusConflict)
}

// mergedWith is who the message after a save names as the author of the
// changes the edit was merged with: theirs's, when its text differs from
// the edit's base (a rename alone changes no text), else the one before.
func mergedWith(base string, theirs Page, before string) string {
	if theirs.Body == base {
		return before
	}
	return theirs.Author
}

// conflictChanged shows the conflict page of overlapping edits: both
// texts, a diff, and a draft holding both versions of the lines they both
// changed, to fix and save; or to overwrite theirs with.
func (a *App) conflictChanged(w http.ResponseWriter, r *http.Request, name string, f saveForm, theirs etagstore.Doc[Page], draft string) {
	a.render(w, http.StatusConflict, "edit", editData{
		Name: name, Title: theirs.Value.Title, Author: f.author, CSRF: a.csrfToken(w, r),
		Body: draft, BaseETag: etaghttp.FormatETag(theirs.ETag), BaseBody: theirs.Value.Body,
		State: stateChanged, Mine: f.mine, Theirs: theirs.Value.Body, TheirsAuthor: theirs.Value.Author,
		Diff: diffLines(lines(theirs.Value.Body), lines(f.mine)),
	})
}

// conflictDeleted shows the conflict page of a page deleted while it was
// edited: the text is kept, and saving it recreates the page (with no
// base version, the save is a create; if someone recreated the page
// meanwhile, it is merged with theirs).
func (a *App) conflictDeleted(w http.ResponseWriter, r *http.Request, name string, f saveForm) {
	a.render(w, http.StatusConflict, "edit", editData{
		Name: name, Title: name, Author: f.author, CSRF: a.csrfToken(w, r),
		Body: f.mine, BaseBody: f.base, State: stateDeleted,
	})
}

// saved redirects to the page, with a message for the next view: "Saved",
// that the edit was merged with changes by fl.Merged, and that it was
// made on fl.Renamed, renamed to this page meanwhile.
func (a *App) saved(w http.ResponseWriter, r *http.Request, name string, fl flash) {
	fl.Saved = true
	setFlash(w, name, fl)
	http.Redirect(w, r, "/wiki/"+name, http.StatusSeeOther)
}

// flash is the message the next view of a page shows.
type flash struct {
	Saved   bool   // after a save
	Merged  string // the save was merged with changes this author saved meanwhile
	Renamed string // the page's old name: after a rename; after a save, the edit was made there
}

// The message after a save or a rename travels in a short-lived cookie
// the server sets, scoped to the page: a link cannot make one up, as it
// could a query parameter.
const flashCookie = "flash"

func setFlash(w http.ResponseWriter, name string, fl flash) {
	v := url.Values{}
	if fl.Saved {
		v.Set("saved", "1")
	}
	if fl.Merged != "" {
		v.Set("merged", fl.Merged)
	}
	if fl.Renamed != "" {
		v.Set("renamed", fl.Renamed)
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(v.Encode()), Path: "/wiki/" + name,
		MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// takeFlash returns the message set for this page, and clears it.
func takeFlash(w http.ResponseWriter, r *http.Request, name string) flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return flash{}
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/wiki/" + name, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	raw, err := url.QueryUnescape(c.Value)
	if err != nil {
		return flash{}
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return flash{}
	}
	return flash{Saved: v.Get("saved") == "1", Merged: v.Get("merged"), Renamed: v.Get("renamed")}
}

// markerLines returns the numbers (from 1) of the lines of text that are
// the conflict markers merge3 writes around two versions of the same
// lines.
func markerLines(text string) []int {
	var at []int
	for i, l := range lines(text) {
		if l = strings.TrimRight(l, " \t"); l == markerMine || l == markerTheirs {
			at = append(at, i+1)
		}
	}
	return at
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
