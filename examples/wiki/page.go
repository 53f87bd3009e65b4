package main

import (
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Page is a wiki page as stored, and as the JSON API shows it. A page
// that was renamed leaves a redirect under its old name: a Page whose
// RedirectTo names the page's new name, with no text and a history of its
// own ("renamed to …"). Viewing, editing or saving a redirect's name goes
// to the page it names; only a rename writes one (see rename.go).
type Page struct {
	Title      string
	Body       string     `table:"split"` // on tables, a page past 32,767 characters is stored across properties
	Author     string     // who saved last
	Updated    time.Time  // kept by the wiki
	Revisions  []Revision // kept by the wiki: newest first, at most maxRevisions
	RedirectTo string     `json:",omitempty"` // kept by the wiki: set on a redirect left by a rename
}

// Revision records one save.
type Revision struct {
	At      time.Time
	Author  string
	Summary string
}

const maxRevisions = 20

var pageName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

var errPageName = errors.New("page names are 1 to 64 letters, digits, '-' or '_'")

// checkName is the wiki's one page-name rule, for its HTML pages and its
// JSON API alike.
func checkName(name string) error {
	if !pageName.MatchString(name) {
		return errPageName
	}
	return nil
}

// revise returns old (the zero Page for a new page) as saved by author
// with title and body: the one place the fields the wiki keeps (Updated,
// Revisions) are set, for the editor and the JSON API alike. An empty
// title is the page's name.
func (a *App) revise(old Page, name, title, body, author, summary string) Page {
	if title == "" {
		title = name
	}
	now := a.now().UTC().Truncate(time.Second)
	revs := append([]Revision{{At: now, Author: author, Summary: summary}}, old.Revisions...)
	return Page{Title: title, Body: body, Author: author, Updated: now, Revisions: revs[:min(len(revs), maxRevisions)]}
}

// redirect is the document a rename leaves under the old name: a pointer
// to the new name, with a history of its own.
func (a *App) redirect(name, to, author string) Page {
	p := a.revise(Page{}, name, "", "", author, "renamed to "+to)
	p.RedirectTo = to
	return p
}

// prepareAPI makes a page written through the JSON API (PUT or PATCH) a
// wiki page like one saved from the editor (etaghttp's Prepare hook):
// Author defaults to "api", and Updated and Revisions are the wiki's — a
// write may leave them out or send them as read, never change them. Only
// a rename makes a redirect: a write naming RedirectTo is refused, and one
// without it over a redirect (a PUT, or a PATCH with "RedirectTo": null)
// makes it a page again.
func (a *App) prepareAPI(_ *http.Request, name string, old, p *Page) error {
	var prior Page
	if old != nil {
		prior = *old
	}
	if !p.Updated.IsZero() && !p.Updated.Equal(prior.Updated) || p.Revisions != nil && !sameRevisions(p.Revisions, prior.Revisions) {
		return errors.New("Updated and Revisions are kept by the wiki: leave them out, or send them as you read them")
	}
	if p.RedirectTo != "" {
		return errors.New("RedirectTo is kept by the wiki: only renaming a page (POST /wiki/{name}/rename) makes a redirect")
	}
	author := strings.TrimSpace(p.Author)
	if author == "" {
		author = "api"
	}
	what := "created through the API"
	if old != nil {
		what = summary(prior.Body, p.Body) + " through the API"
	}
	*p = a.revise(prior, name, p.Title, p.Body, author, what)
	return nil
}

func sameRevisions(a, b []Revision) bool {
	return slices.EqualFunc(a, b, func(x, y Revision) bool {
		return x.At.Equal(y.At) && x.Author == y.Author && x.Summary == y.Summary
	})
}
