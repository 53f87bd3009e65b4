package main

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// htmlForm is one <form> of a page: its hidden fields, whether it holds
// the editable text box, and its submit buttons (id -> name=value).
type htmlForm struct {
	fields  url.Values
	textBox bool
	buttons map[string][2]string
}

var (
	formRE   = regexp.MustCompile(`(?s)<form[^>]*>.*?</form>`)
	buttonRE = regexp.MustCompile(`<button[^>]*>`)
	attrRE   = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

func forms(page string) []htmlForm {
	var out []htmlForm
	for _, f := range formRE.FindAllString(page, -1) {
		hf := htmlForm{fields: url.Values{}, buttons: map[string][2]string{}}
		for _, m := range hiddenField.FindAllStringSubmatch(f, -1) {
			hf.fields.Set(m[1], html.UnescapeString(m[2]))
		}
		hf.textBox = strings.Contains(f, `<textarea name="body"`)
		for _, b := range buttonRE.FindAllString(f, -1) {
			attrs := map[string]string{}
			for _, a := range attrRE.FindAllStringSubmatch(b, -1) {
				attrs[a[1]] = html.UnescapeString(a[2])
			}
			hf.buttons[attrs["id"]] = [2]string{attrs["name"], attrs["value"]}
		}
		out = append(out, hf)
	}
	return out
}

// press submits the form holding button id the way a browser does: its
// fields, the text box's text and the button's name=value.
func (e *editor) press(page, id, name, text string) (int, string) {
	e.t.Helper()
	for _, f := range forms(page) {
		b, ok := f.buttons[id]
		if !ok {
			continue
		}
		if !f.textBox {
			e.t.Fatalf("the form of #%s does not hold the text box: it cannot submit what the user typed", id)
		}
		form := url.Values{}
		for k, v := range f.fields {
			form[k] = v
		}
		form.Set("body", text)
		form.Set("author", "tester")
		if b[0] != "" {
			form.Set(b[0], b[1])
		}
		resp, err := e.c.PostForm(e.base+"/wiki/"+name+"/edit", form)
		if err != nil {
			e.t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	e.t.Fatalf("no button #%s on the page:\n%s", id, page)
	return 0, ""
}

var (
	headingRE = regexp.MustCompile(`(?s)<h1[^>]*>(.*?)</h1>`)
	boxRE     = regexp.MustCompile(`(?s)<textarea name="body"[^>]*>(.*?)</textarea>`)
)

func heading(page string) string {
	if m := headingRE.FindStringSubmatch(page); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

func box(page string) string {
	if m := boxRE.FindStringSubmatch(page); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

// conflict makes a and b edit line 2 of Sandbox differently; a saves
// first. It returns b's text and b's conflict page.
func conflict(t *testing.T, a, b *editor) (string, string) {
	t.Helper()
	textA, textB := a.open("Sandbox"), b.open("Sandbox")
	if code, page := a.save("Sandbox", strings.Replace(textA, "line 2", "A's line 2", 1), nil); code != 200 {
		t.Fatalf("A's save: %d\n%s", code, page)
	}
	mine := strings.Replace(textB, "line 2", "B's line 2", 1)
	code, page := b.save("Sandbox", mine, nil)
	if code != http.StatusConflict {
		t.Fatalf("overlapping save: %d, want 409\n%s", code, page)
	}
	return mine, page
}

// The conflict page says it is a conflict and explains the markers in
// plain words.
func TestConflictPageSaysConflict(t *testing.T) {
	srv, _ := newWiki(t)
	_, page := conflict(t, newEditor(t, srv), newEditor(t, srv))
	if h := heading(page); !strings.Contains(strings.ToLower(h), "conflict") || strings.HasPrefix(h, "Editing") {
		t.Errorf("conflict page heading %q: it should say there is a conflict", h)
	}
	for _, want := range []string{"&lt;&lt;&lt;&lt;&lt;&lt;&lt; your edit", "&gt;&gt;&gt;&gt;&gt;&gt;&gt; saved meanwhile", "=======", "delete the marker lines"} {
		if !strings.Contains(page, want) {
			t.Errorf("the conflict page does not explain the markers: no %q", want)
		}
	}
}

// "Overwrite anyway" saves the text in the box, as the user edited it.
func TestOverwriteSavesTheDraft(t *testing.T) {
	srv, pages := newWiki(t)
	b := newEditor(t, srv)
	mine, page := conflict(t, newEditor(t, srv), b)
	draft := strings.Replace(mine, "line 4", "line 4, edited in the draft box", 1)
	code, _ := b.press(page, "overwrite", "Sandbox", draft)
	d, _ := pages.Get(t.Context(), "Sandbox")
	if code != 200 || d.Value.Body != draft {
		t.Fatalf("overwrite: %d, stored:\n%s\nwant the draft:\n%s", code, d.Value.Body, draft)
	}
}

// A page deleted while someone edits it: saving shows the conflict page
// with the text kept, offering to recreate the page.
func TestDeletedWhileEditing(t *testing.T) {
	srv, pages := newWiki(t)
	e := newEditor(t, srv)
	text := e.open("Sandbox")
	cur, _ := pages.Get(t.Context(), "Sandbox")
	if err := pages.Delete(t.Context(), "Sandbox", cur.ETag); err != nil {
		t.Fatal(err)
	}
	mine := strings.Replace(text, "line 3", "line 3, edited", 1)
	code, page := e.save("Sandbox", mine, nil)
	if code != http.StatusConflict || box(page) != mine || !strings.Contains(strings.ToLower(heading(page)), "deleted") {
		t.Fatalf("save of a deleted page: %d, heading %q, box %q\n%s", code, heading(page), box(page), page)
	}
	code, _ = e.press(page, "recreate", "Sandbox", mine)
	d, err := pages.Get(t.Context(), "Sandbox")
	if code != 200 || err != nil || d.Value.Body != mine {
		t.Fatalf("recreate: %d, %v, stored:\n%s", code, err, d.Value.Body)
	}
}

// A save that still holds the conflict markers is refused, saying why,
// with the text kept; once they are gone it is saved.
func TestUnresolvedMarkersRefused(t *testing.T) {
	srv, pages := newWiki(t)
	b := newEditor(t, srv)
	_, page := conflict(t, newEditor(t, srv), b)
	draft := box(page)
	before, _ := pages.Get(t.Context(), "Sandbox")
	for _, button := range []string{"save", "overwrite"} {
		code, refused := b.press(page, button, "Sandbox", draft)
		if code != http.StatusUnprocessableEntity || box(refused) != draft || !strings.Contains(refused, `id="markers"`) {
			t.Fatalf("%s with markers: %d, box %q\n%s", button, code, box(refused), refused)
		}
		if after, _ := pages.Get(t.Context(), "Sandbox"); after.ETag != before.ETag {
			t.Fatalf("%s with markers wrote:\n%s", button, after.Value.Body)
		}
		page = refused
	}
	resolved := "line 1\nA's and B's line 2\nline 3\nline 4\nline 5\nline 6"
	if code, _ := b.press(page, "save", "Sandbox", resolved); code != 200 {
		t.Fatalf("resolved save: %d", code)
	}
	if d, _ := pages.Get(t.Context(), "Sandbox"); d.Value.Body != resolved {
		t.Fatalf("stored:\n%s", d.Value.Body)
	}
}

// The merge message cannot be forged by a link.
func TestMergeMessageNotForgeable(t *testing.T) {
	srv, _ := newWiki(t)
	for _, q := range []string{"?merged=Mallory+%28trust+me%29", "?merged=x&saved=1"} {
		resp, err := srv.Client().Get(srv.URL + "/wiki/Home" + q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "Mallory") || strings.Contains(string(b), `id="flash"`) {
			t.Errorf("GET /wiki/Home%s shows a message a link made up:\n%s", q, b)
		}
	}
}

// The JSON API follows the wiki's page-name rule and page model.
func TestAPISharesNameRuleAndModel(t *testing.T) {
	srv, pages := newWiki(t)
	put := func(path, body string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, bad := range []string{"My%20Page", "a%2Fb", "..%2Fx", strings.Repeat("x", 65)} {
		if resp, body := put("/api/pages/"+bad, `{"Body":"b"}`, map[string]string{"If-None-Match": "*"}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT /api/pages/%s: %d %s, want 400", bad, resp.StatusCode, body)
		}
	}
	resp, body := put("/api/pages/From_API", `{"Body":"made by a script","Author":"bot"}`, map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT a good name: %d %s", resp.StatusCode, body)
	}
	d, err := pages.Get(t.Context(), "From_API")
	if err != nil {
		t.Fatal(err)
	}
	if d.Value.Title != "From_API" || d.Value.Author != "bot" || time.Since(d.Value.Updated) > time.Minute || len(d.Value.Revisions) != 1 {
		t.Errorf("a page made through the API is not a wiki page: %+v", d.Value)
	}
	// Updated and Revisions are the server's: sending other ones is refused.
	tag := resp.Header.Get("ETag")
	if resp, body := put("/api/pages/From_API", `{"Body":"x","Revisions":[]}`, map[string]string{"If-Match": tag}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT with made-up revisions: %d %s, want 400", resp.StatusCode, body)
	}
	// Every page the index links to opens.
	resp, err = srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	index, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(index), "0001-01-01") {
		t.Errorf("the index shows a zero time:\n%s", index)
	}
	for _, m := range regexp.MustCompile(`href="(/wiki/[^"]*)"`).FindAllStringSubmatch(string(index), -1) {
		resp, err := srv.Client().Get(srv.URL + m[1])
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("the index links to %s, which answers %d", m[1], resp.StatusCode)
		}
	}
}
