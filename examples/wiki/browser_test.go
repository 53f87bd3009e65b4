package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/etagstore/etagstore"
)

// screenshotDir is where the browser test leaves its screenshots, from the
// repository root: out/browser/.
var screenshotDir = filepath.Join("..", "..", "out", "browser")

// chromium finds Debian's Chromium (scripts/test installs it). A missing
// browser fails the test: it is never skipped.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("no Chromium: run the tests through scripts/test, which installs Debian's chromium")
	return ""
}

// TestBrowserTwoEditors drives two separate browser sessions (isolated
// browser contexts: separate cookies) through the wiki's edit flow in
// headless Chromium.
func TestBrowserTwoEditors(t *testing.T) {
	srv, pages := newWiki(t)
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 900),
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // start the browser
		t.Fatalf("start Chromium: %v", err)
	}
	alice, cancelA := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancelA()
	bob, cancelB := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancelB()

	edit := srv.URL + "/wiki/Sandbox/edit"
	run := func(who context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(who, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	get := func(who context.Context, what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(who, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	text := func(who context.Context, id string) string {
		t.Helper()
		return get(who, "read #"+id, chromedp.Text(chromedp.ID(id)))
	}
	shot := func(who context.Context, name string) {
		t.Helper()
		png, err := chromedp.Run(who, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join(screenshotDir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	openEditor := func(who context.Context, name string) string {
		run(who, name+" opens the editor",
			chromedp.Navigate(edit), chromedp.WaitVisible(chromedp.ID("body")),
			chromedp.SetValue(chromedp.ID("author"), name))
		return get(who, name+" reads the editor", chromedp.Value(chromedp.ID("body")))
	}
	saveAs := func(who context.Context, name, newText string) {
		run(who, name+" saves",
			chromedp.SetValue(chromedp.ID("body"), newText),
			chromedp.Click(chromedp.ID("save")),
			chromedp.WaitReady(chromedp.CSS("body")))
	}

	// (a) Disjoint edits: both kept.
	a := openEditor(alice, "alice")
	b := openEditor(bob, "bob")
	saveAs(alice, "alice", strings.Replace(a, "line 1", "line 1, edited by alice", 1))
	run(alice, "alice sees her save", chromedp.WaitVisible(chromedp.ID("content")))
	saveAs(bob, "bob", strings.Replace(b, "line 6", "line 6, edited by bob", 1))
	run(bob, "bob sees the merged page", chromedp.WaitVisible(chromedp.ID("flash")))
	content := text(bob, "content")
	if !strings.Contains(content, "line 1, edited by alice") || !strings.Contains(content, "line 6, edited by bob") {
		t.Fatalf("(a) the merged page lost an edit:\n%s", content)
	}
	if flash := text(bob, "flash"); !strings.Contains(flash, "merged") || !strings.Contains(flash, "alice") {
		t.Errorf("(a) bob was not told about the merge: %q", flash)
	}
	shot(bob, "a-disjoint-edits-merged.png")

	// (b) Overlapping edits: bob gets the conflict page with both texts.
	a = openEditor(alice, "alice")
	b = openEditor(bob, "bob")
	saveAs(alice, "alice", strings.Replace(a, "line 3", "line 3 as alice wants it", 1))
	run(alice, "alice sees her save", chromedp.WaitVisible(chromedp.ID("content")))
	bobsText := strings.Replace(b, "line 3", "line 3 as bob wants it", 1)
	saveAs(bob, "bob", bobsText)
	run(bob, "bob sees the conflict page", chromedp.WaitVisible(chromedp.ID("conflict")))
	theirs, mine := text(bob, "theirs"), text(bob, "mine")
	if !strings.Contains(theirs, "line 3 as alice wants it") || !strings.Contains(mine, "line 3 as bob wants it") {
		t.Fatalf("(b) conflict page: theirs %q, mine %q", theirs, mine)
	}
	draft := get(bob, "read the draft", chromedp.Value(chromedp.ID("body")))
	if !strings.Contains(draft, "line 3 as bob wants it") || !strings.Contains(draft, "line 3 as alice wants it") {
		t.Errorf("(b) the editable draft does not hold both versions:\n%s", draft)
	}
	if d, _ := pages.Get(t.Context(), "Sandbox"); strings.Contains(d.Value.Body, "bob wants") {
		t.Fatal("(b) the conflicting save was written")
	}
	if h := get(bob, "read the heading", chromedp.Text(chromedp.CSS("h1"))); !strings.HasPrefix(h, "Conflict") {
		t.Errorf("(b) the conflict page's heading is %q", h)
	}
	shot(bob, "b-overlapping-edits-conflict.png")

	// (c) Saving the draft with its conflict markers still in it is
	// refused, saying why; the text stays in the box; nothing is written.
	run(bob, "bob saves the draft unchanged", chromedp.Click(chromedp.ID("save")), chromedp.WaitVisible(chromedp.ID("markers")))
	if kept := get(bob, "read the box", chromedp.Value(chromedp.ID("body"))); kept != draft {
		t.Errorf("(c) the refused draft was not kept:\n%s\nwant:\n%s", kept, draft)
	}
	if h := text(bob, "markers"); !strings.Contains(h, "conflict markers") {
		t.Errorf("(c) the refusal does not say why: %q", h)
	}
	if d, _ := pages.Get(t.Context(), "Sandbox"); strings.Contains(d.Value.Body, markerMine) {
		t.Fatal("(c) a text with conflict markers was saved")
	}
	shot(bob, "c-unresolved-markers-refused.png")

	// (d) Overwrite anyway saves what is in the box: bob's text, edited
	// further in the box, replaces alice's, deliberately.
	edited := strings.Replace(bobsText, "line 5", "line 5, edited in the draft box", 1)
	run(bob, "bob overwrites with his edited draft",
		chromedp.SetValue(chromedp.ID("body"), edited),
		chromedp.Click(chromedp.ID("overwrite")), chromedp.WaitVisible(chromedp.ID("content")))
	content = text(bob, "content")
	if !strings.Contains(content, "line 5, edited in the draft box") || strings.Contains(content, "alice wants") {
		t.Fatalf("(d) after overwrite the page shows:\n%s", content)
	}
	if d, _ := pages.Get(t.Context(), "Sandbox"); d.Value.Body != strings.ReplaceAll(edited, "\r\n", "\n") {
		t.Fatalf("(d) stored body:\n%s\nwant bob's edited draft:\n%s", d.Value.Body, edited)
	}
	shot(bob, "d-overwrite-with-edited-draft.png")

	// (e) The page is deleted while alice edits it: her save shows the
	// conflict page with her text kept, and recreating the page saves it.
	a = openEditor(alice, "alice")
	cur, err := pages.Get(t.Context(), "Sandbox")
	if err == nil {
		err = pages.Delete(t.Context(), "Sandbox", cur.ETag)
	}
	if err != nil {
		t.Fatal(err)
	}
	alicesText := strings.Replace(a, "line 2", "line 2, edited by alice", 1)
	saveAs(alice, "alice", alicesText)
	run(alice, "alice sees the conflict page", chromedp.WaitVisible(chromedp.ID("conflict")))
	if kept := get(alice, "read the box", chromedp.Value(chromedp.ID("body"))); kept != alicesText {
		t.Errorf("(e) alice's text was not kept:\n%s", kept)
	}
	if h := get(alice, "read the heading", chromedp.Text(chromedp.CSS("h1"))); !strings.Contains(h, "deleted") {
		t.Errorf("(e) heading %q does not say the page was deleted", h)
	}
	shot(alice, "e-deleted-meanwhile-conflict.png")
	run(alice, "alice recreates the page", chromedp.Click(chromedp.ID("recreate")), chromedp.WaitVisible(chromedp.ID("content")))
	if d, err := pages.Get(t.Context(), "Sandbox"); err != nil || d.Value.Body != strings.ReplaceAll(alicesText, "\r\n", "\n") {
		t.Fatalf("(e) after recreate: %v, stored:\n%s", err, d.Value.Body)
	}
	shot(alice, "f-deleted-page-recreated.png")

	// (g) Alice renames the page; bob's visit of the old name lands on it.
	browserRename(t, srv.URL, alice, bob, pages, shot)
	t.Logf("screenshots in %s", screenshotDir)
}

// browserRename: alice renames Sandbox to Playground with the form on its
// view and lands on Playground, told so; bob opens the old name and lands
// there too, told he was redirected.
func browserRename(t *testing.T, base string, alice, bob context.Context, pages *etagstore.Store[Page], shot func(context.Context, string)) {
	t.Helper()
	err := chromedp.Do(alice, chromedp.Navigate(base+"/wiki/Sandbox"), chromedp.WaitVisible(chromedp.ID("to")),
		chromedp.SetValue(chromedp.ID("to"), "Playground"), chromedp.Click(chromedp.ID("rename")),
		chromedp.WaitVisible(chromedp.ID("flash")))
	if err != nil {
		t.Fatalf("(g) alice renames Sandbox: %v", err)
	}
	flash, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("flash")))
	if err != nil || !strings.Contains(flash, "Renamed from Sandbox") {
		t.Errorf("(g) after the rename alice is told %q (%v)", flash, err)
	}
	if d, err := pages.Get(t.Context(), "Sandbox"); err != nil || d.Value.RedirectTo != "Playground" {
		t.Fatalf("(g) Sandbox after the rename: %+v, %v", d.Value, err)
	}
	if err := chromedp.Do(bob, chromedp.Navigate(base+"/wiki/Sandbox"), chromedp.WaitVisible(chromedp.ID("redirected"))); err != nil {
		t.Fatalf("(g) bob opens Sandbox: %v", err)
	}
	where, err := chromedp.Run(bob, chromedp.Location())
	if err != nil || !strings.Contains(where, "/wiki/Playground") {
		t.Errorf("(g) bob opened Sandbox and is at %q (%v), want Playground", where, err)
	}
	shot(bob, "g-renamed-old-name-redirects.png")
}
