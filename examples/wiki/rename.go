package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/etagstore/etagstore"
)

// This file is renaming a page. A rename is one transaction
// (Store.Transact): it reads the page and the new name, and commits the
// page under its new name and a redirect under the old one together, or
// nothing. A save that lands on the page first is in the renamed page (the
// transaction's read of it is checked at commit, and it runs again on the
// new version); a save from an editor opened before the rename follows the
// redirect and is merged into the renamed page. Blob storage cannot commit
// two documents at once: there Transact fails with errors.ErrUnsupported
// before reading anything, and the wiki says renaming needs a backend with
// transactions.

// maxRedirects is how many redirects in a row a save follows.
const maxRedirects = 5

var (
	errNameTaken    = errors.New("a page holds the new name")
	errRedirectLoop = errors.New("too many redirects")
)

// renamedError is a rename of a page that is a redirect already: it was
// renamed to To.
type renamedError struct{ To string }

func (e renamedError) Error() string { return "the page was renamed to " + e.To }

// noTransactions is the refusal of a rename on a backend without
// transactions (blob storage).
const noTransactions = "Not renamed: renaming needs a backend with transactions. " +
	"A rename writes the page under its new name and a redirect under the old one in one commit, " +
	"and this wiki's storage (Azure Blob storage) cannot commit two pages at once. " +
	"Run the wiki in memory or on Azure Table storage (-table) to rename pages. Nothing was changed."

// rename answers the rename form of a page's view (POST
// /wiki/{name}/rename, field "to"): on success it redirects to the page
// under its new name; otherwise it shows the page again with why nothing
// was changed.
func (a *App) rename(w http.ResponseWriter, r *http.Request) {
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
		http.Error(w, "missing or wrong CSRF token: reload the page", http.StatusForbidden)
		return
	}
	to := strings.TrimSpace(r.PostFormValue("to"))
	if err := checkName(to); err != nil {
		a.renameRefused(w, r, name, to, http.StatusBadRequest, "Not renamed: "+err.Error()+".")
		return
	}
	if to == name {
		a.renameRefused(w, r, name, to, http.StatusBadRequest, "Not renamed: the page is already called "+name+".")
		return
	}
	author := authorCookie(r)
	if author == "" {
		author = "anonymous"
	}
	_, err := a.pages.Transact(r.Context(), func(tx *etagstore.Tx[Page]) error {
		return a.renameTx(tx, name, to, author)
	})
	var moved renamedError
	switch {
	case err == nil:
		setFlash(w, to, flash{Renamed: name})
		http.Redirect(w, r, "/wiki/"+to, http.StatusSeeOther)
	case errors.Is(err, errNameTaken):
		a.renameRefused(w, r, name, to, http.StatusConflict, fmt.Sprintf(
			"Not renamed: a page named %s already exists. Nothing was changed: pick another name, or rename or delete %s first.", to, to))
	case errors.As(err, &moved):
		http.Error(w, fmt.Sprintf("Not renamed: %s was renamed to %s meanwhile.", name, moved.To), http.StatusConflict)
	case errors.Is(err, errors.ErrUnsupported):
		a.renameRefused(w, r, name, to, http.StatusNotImplemented, noTransactions)
	default:
		a.fail(w, err)
	}
}

// renameTx is one attempt of the rename of name to to: it reads both
// names and puts the page under to and a redirect under name. The new
// name is free when nothing is stored under it, or a redirect to this
// page (renaming back); anything else is errNameTaken, and nothing is
// written. The reads are checked at commit: a page saved, created or
// renamed meanwhile makes Transact run this again on what is stored then.
func (a *App) renameTx(tx *etagstore.Tx[Page], name, to, author string) error {
	old, err := tx.Get(name)
	if err != nil {
		return err // ErrNotFound: deleted meanwhile
	}
	if old.RedirectTo != "" {
		return renamedError{old.RedirectTo}
	}
	switch cur, err := tx.Get(to); {
	case errors.Is(err, etagstore.ErrNotFound):
	case err != nil:
		return err
	case cur.RedirectTo != name:
		return errNameTaken
	}
	title := old.Title
	if title == name { // the default title follows the name
		title = to
	}
	moved := a.revise(old, to, title, old.Body, author, "renamed from "+name)
	return errors.Join(tx.Put(to, moved), tx.Put(name, a.redirect(name, to, author)))
}

// renameRefused shows the page again, with the name typed kept in the
// rename form and msg beside it.
func (a *App) renameRefused(w http.ResponseWriter, r *http.Request, name, to string, status int, msg string) {
	d, err := a.pages.Get(r.Context(), name)
	if err != nil || d.Value.RedirectTo != "" {
		http.Error(w, msg, status)
		return
	}
	a.render(w, status, "view", viewData{Name: name, Page: d.Value, CSRF: a.csrfToken(w, r), RenameTo: to, RenameError: msg})
}

// follow reads name and, while what it finds is a redirect, the page the
// redirect names: a save of a page renamed meanwhile goes to its new name.
// It returns the name it ended at and what is stored there.
func (a *App) follow(ctx context.Context, name string) (string, etagstore.Doc[Page], error) {
	for range maxRedirects + 1 {
		d, err := a.pages.Get(ctx, name)
		if err != nil || d.Value.RedirectTo == "" {
			return name, d, err
		}
		name = d.Value.RedirectTo
	}
	return name, etagstore.Doc[Page]{}, fmt.Errorf("%w (more than %d in a row, at %s)", errRedirectLoop, maxRedirects, name)
}

// redirectTo answers a request for a redirect's name with 303 See Other
// to the page it names; from (carried as ?from=) lets that page say where
// the reader came from.
func redirectTo(w http.ResponseWriter, r *http.Request, to, suffix, from string) {
	u := "/wiki/" + to + suffix
	if from != "" {
		u += "?" + url.Values{"from": {from}}.Encode()
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// redirectedFrom returns the name the reader was redirected from (?from=),
// when that name really is a redirect to name; "" otherwise, so a link
// cannot make the note up.
func (a *App) redirectedFrom(ctx context.Context, r *http.Request, name string) string {
	from := r.URL.Query().Get("from")
	if from == "" || checkName(from) != nil {
		return ""
	}
	if d, err := a.pages.Get(ctx, from); err != nil || d.Value.RedirectTo != name {
		return ""
	}
	return from
}
