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
	shot(bob, "b-overlapping-edits-conflict.png")

	// (c) Overwrite anyway: bob's text replaces alice's, deliberately.
	run(bob, "bob overwrites", chromedp.Click(chromedp.ID("overwrite")), chromedp.WaitVisible(chromedp.ID("content")))
	content = text(bob, "content")
	if !strings.Contains(content, "line 3 as bob wants it") || strings.Contains(content, "alice wants") {
		t.Fatalf("(c) after overwrite the page shows:\n%s", content)
	}
	if d, _ := pages.Get(t.Context(), "Sandbox"); d.Value.Body != strings.ReplaceAll(bobsText, "\r\n", "\n") {
		t.Fatalf("(c) stored body:\n%s\nwant bob's text:\n%s", d.Value.Body, bobsText)
	}
	shot(bob, "c-overwrite-anyway.png")
	t.Logf("screenshots in %s", screenshotDir)
}
