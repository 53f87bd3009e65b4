package main

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/internal/smoke"
)

// The README's `go run ./examples/wiki` (and its -table and -blob forms, in docs/web-apps.md, on
// Azurite), run as a program: it starts on a free loopback port, serves the
// index, a page, its editor and the JSON API, and stops cleanly on an
// interrupt. A hang, a panic or a failed request fails the test.
func TestMainSmoke(t *testing.T) {
	bin := smoke.Build(t)
	t.Run("memory", func(t *testing.T) {
		smokeWiki(t, bin, "memory")
	})
	t.Run("table", func(t *testing.T) {
		smokeWiki(t, bin, "Azure table wiki", "-table", azuritetest.ConnectionString(t))
	})
	t.Run("blob", func(t *testing.T) {
		smokeWiki(t, bin, "Azure blob container wiki", "-blob", azuritetest.ConnectionString(t))
	})
}

// smokeRename renames a fresh page with the form on its view, as a browser
// does: with transactions (memory, tables) the old name then leads to the
// new one; without (blobs) the rename is refused, saying why.
func smokeRename(t *testing.T, ctx context.Context, base string, transactions bool, output func() string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Timeout: 10 * time.Second, Jar: jar}
	do := func(method, path string, body io.Reader, header http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, body)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v; %s", method, path, err, output())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	name := fmt.Sprintf("Smoke_%d", time.Now().UnixNano())
	if resp, body := do(http.MethodPut, "/api/pages/"+name, strings.NewReader(`{"Body":"to be renamed"}`), http.Header{"If-None-Match": {"*"}}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT /api/pages/%s: %s\n%s", name, resp.Status, body)
	}
	_, view := do(http.MethodGet, "/wiki/"+name, nil, nil)
	m := renameCSRF.FindStringSubmatch(view)
	if m == nil {
		t.Fatalf("no rename form on /wiki/%s:\n%s", name, view)
	}
	form := url.Values{"csrf": {html.UnescapeString(m[1])}, "to": {name + "_renamed"}}
	resp, body := do(http.MethodPost, "/wiki/"+name+"/rename", strings.NewReader(form.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if !transactions {
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(body, "renaming needs a backend with transactions") {
			t.Errorf("rename without transactions: %s, want 501 saying it needs transactions:\n%s", resp.Status, body)
		}
		return
	}
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/wiki/"+name+"_renamed" {
		t.Fatalf("rename: %s at %s\n%s", resp.Status, resp.Request.URL.Path, body)
	}
	if resp, body := do(http.MethodGet, "/wiki/"+name, nil, nil); resp.Request.URL.Path != "/wiki/"+name+"_renamed" || !strings.Contains(body, "to be renamed") {
		t.Errorf("GET /wiki/%s after the rename ended at %s:\n%s", name, resp.Request.URL.Path, body)
	}
}

var listening = regexp.MustCompile(`wiki on (http://127\.0\.0\.1:\d+) \(pages in ([^)]*)\)`)

// signalling passes writes on to w and then signals on wrote, without
// waiting: one signal pending is enough to make the reader look again.
type signalling struct {
	w     io.Writer
	wrote chan<- struct{}
}

func (s signalling) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// smokeWiki runs the wiki with args (never shown: they hold a connection
// string) and checks it keeps its pages in where.
func smokeWiki(t *testing.T, bin, where string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr smoke.Buffer
	cmd := smoke.Command(ctx, bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	logged := make(chan struct{}, 1) // the wiki wrote to stderr since we last looked
	cmd.Stdout, cmd.Stderr = &stdout, signalling{&stderr, logged}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	running := true
	defer func() { // a failed check leaves the server running: end it
		if running {
			cancel()
			<-exited
		}
	}()
	output := func() string {
		return "its stdout:\n" + smoke.Indent(stdout.String()) + "\nits stderr:\n" + smoke.Indent(stderr.String())
	}

	// Started: the log names the port it chose.
	var base string
	for base == "" {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
			if m[2] != where {
				t.Errorf("pages in %q, want %q", m[2], where)
			}
			break
		}
		select {
		case err := <-exited:
			running = false
			t.Fatalf("the wiki exited before it listened: %v; %s", err, output())
		case <-ctx.Done():
			cancel()
			<-exited
			running = false
			t.Fatalf("the wiki did not listen within 30 s; %s", output())
		case <-logged:
		}
	}

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string, header http.Header, wantStatus int, wantBody ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v; %s", path, err, output())
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: %v; %s", path, err, output())
		}
		if resp.StatusCode != wantStatus {
			t.Fatalf("GET %s: %s, want %d:\n%s", path, resp.Status, wantStatus, body)
		}
		for _, w := range wantBody {
			if !strings.Contains(string(body), w) {
				t.Errorf("GET %s: no %q in\n%s", path, w, body)
			}
		}
		return resp
	}
	get("/", nil, http.StatusOK, `<a href="/wiki/Home">Home</a>`, `<a href="/wiki/Sandbox">Sandbox</a>`)
	get("/wiki/Home", nil, http.StatusOK, `<h1 id="title">Home</h1>`, "Welcome to the etagstore wiki.")
	get("/wiki/Sandbox/edit", nil, http.StatusOK, "<h1>Editing Sandbox</h1>", `<textarea name="body"`)
	resp := get("/api/pages/Sandbox", nil, http.StatusOK, `"Title":"Sandbox"`)
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Errorf("GET /api/pages/Sandbox: no ETag header")
	} else {
		get("/api/pages/Sandbox", http.Header{"If-None-Match": {etag}}, http.StatusNotModified)
	}
	get("/api/pages/No_such_page", nil, http.StatusNotFound)
	smokeRename(t, ctx, base, where != "Azure blob container wiki", output)

	// Stopped: an interrupt ends it cleanly, with exit status 0.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		running = false
		if err != nil {
			t.Fatalf("after an interrupt the wiki exited with %v; %s", err, output())
		}
	case <-ctx.Done():
		cancel()
		<-exited
		running = false
		t.Fatalf("the wiki did not stop within 30 s of starting (it got an interrupt); %s", output())
	}
	if !strings.Contains(stderr.String(), "wiki stopped") {
		t.Errorf("no \"wiki stopped\" in the log; %s", output())
	}
	t.Logf("served %s on %s and stopped", where, base)
}
