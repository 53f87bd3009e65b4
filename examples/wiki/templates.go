package main

import (
	"html/template"
	"log"
	"net/http"
	"time"
)

func (a *App) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := templates.ExecuteTemplate(w, name, data); err != nil {
		log.Printf("wiki: render %s: %v", name, err)
	}
}

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"when":         func(t time.Time) string { return t.Format("2006-01-02 15:04 UTC") },
	"markerMine":   func() string { return markerMine },
	"markerSep":    func() string { return markerSep },
	"markerTheirs": func() string { return markerTheirs },
}).Parse(`
{{define "head"}}<!doctype html><html><head><meta charset="utf-8"><title>{{.}} · etagstore wiki</title>
<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}pre,textarea{font-family:monospace;font-size:14px}
textarea{width:100%}.note{background:#eef;padding:.5em}.warn{background:#fed;padding:.5em}.help{background:#f4f4f4;padding:.5em}
.cols{display:flex;gap:1em}.cols>div{flex:1}h1.conflict{color:#a40}
pre.text{white-space:pre-wrap;border:1px solid #ccc;padding:.5em}.del{color:#a00}.add{color:#070}</style></head><body>
<p><a href="/">All pages</a></p>{{end}}
{{define "foot"}}</body></html>{{end}}

{{define "index"}}{{template "head" "Pages"}}<h1>Pages</h1><ul>
{{range .Pages}}<li><a href="/wiki/{{.Key}}">{{.Value.Title}}</a> — {{if .Value.RedirectTo}}renamed to <a href="/wiki/{{.Value.RedirectTo}}">{{.Value.RedirectTo}}</a>{{else}}{{.Value.Author}}{{end}}, {{when .Value.Updated}}</li>{{end}}</ul>
{{if .Next}}<p><a id="next" rel="next" href="{{.Next}}">More pages</a></p>{{end}}
<p>JSON API: <code>/api/pages/{name}</code> (GET, PUT with If-Match, PATCH, DELETE).</p>{{template "foot"}}{{end}}

{{define "view"}}{{template "head" .Page.Title}}<h1 id="title">{{.Page.Title}}</h1>
{{if .From}}<p id="redirected">(Redirected from {{.From}}, the page's old name.)</p>{{end}}
{{with .Flash}}{{if .Saved}}<p class="note" id="flash">Saved.{{if .Renamed}} The page you edited, {{.Renamed}}, was renamed to {{$.Name}} meanwhile: your edit was saved here.{{end}}{{if .Merged}} Your edit was merged with changes saved meanwhile by {{.Merged}}.{{end}}</p>
{{else if .Renamed}}<p class="note" id="flash">Renamed from {{.Renamed}}. Links to {{.Renamed}} now lead here.</p>{{end}}{{end}}
<pre class="text" id="content">{{.Page.Body}}</pre>
<p>Last edited by {{.Page.Author}}, {{when .Page.Updated}} · <a id="edit" href="/wiki/{{.Name}}/edit">Edit</a> · <a href="/wiki/{{.Name}}/history">History</a></p>
{{if .RenameError}}<div class="warn" id="renameerror"><p>{{.RenameError}}</p></div>{{end}}
<form method="post" action="/wiki/{{.Name}}/rename" id="renameform">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<p><label>Rename to <input name="to" id="to" value="{{.RenameTo}}" required maxlength="64" pattern="[A-Za-z0-9_\-]{1,64}"
title="1 to 64 letters, digits, - or _"></label> <button type="submit" id="rename">Rename</button>
(the old name then leads here)</p></form>{{template "foot"}}{{end}}

{{define "history"}}{{template "head" .Page.Title}}<h1>History of {{.Page.Title}}</h1><ol>
{{range .Page.Revisions}}<li>{{when .At}} — {{.Author}}: {{.Summary}}</li>{{end}}</ol>{{template "foot"}}{{end}}

{{define "markers-help"}}<div class="help" id="howto"><p><b>How to fix the text.</b> Where you and the other person
changed the same lines, the box holds both versions, one after the other, between three marker lines:</p>
<pre>{{markerMine}}
  … the lines as you wrote them …
{{markerSep}}
  … the lines as they were saved meanwhile …
{{markerTheirs}}</pre>
<p>Edit the box so it says what the page should say: keep your lines, theirs, or a mix of both.
Then delete the marker lines (the ones starting with &lt;&lt;&lt;&lt;&lt;&lt;&lt;, ======= and &gt;&gt;&gt;&gt;&gt;&gt;&gt;) and press Save.
The wiki does not save text that still holds them.</p></div>{{end}}

{{define "edit"}}{{template "head" .Title}}
{{if .Markers}}<h1 class="conflict">Not saved: {{.Title}} still holds conflict markers</h1>
{{else if eq .State "changed"}}<h1 class="conflict">Conflict: {{.Title}} was changed while you were editing</h1>
{{else if eq .State "deleted"}}<h1 class="conflict">Conflict: {{.Title}} was deleted while you were editing</h1>
{{else}}<h1>Editing {{.Title}}</h1>{{end}}
{{if .Markers}}<div class="warn" id="markers"><p><b>Nothing was saved: the text still holds conflict markers</b>
(line{{if gt (len .Markers) 1}}s{{end}} {{range $i, $n := .Markers}}{{if $i}}, {{end}}{{$n}}{{end}}), so part of it still shows two versions of the same lines.
Your text is kept in the box below.</p></div>{{template "markers-help"}}
{{else if eq .State "changed"}}<div class="warn" id="conflict"><p><b>Someone else ({{.TheirsAuthor}}) saved this page while you were editing, and changed the same lines as you.</b>
Nothing of yours was lost: your edit is below, next to theirs. The box holds a draft with both versions of those lines.
Fix the draft and press Save, or press “Overwrite anyway” to replace their version with the text in the box.</p></div>
{{template "markers-help"}}
<div class="cols"><div><h3>Saved meanwhile (theirs)</h3><pre class="text" id="theirs">{{.Theirs}}</pre></div>
<div><h3>Your edit (mine)</h3><pre class="text" id="mine">{{.Mine}}</pre></div></div>
<h3>Changes from theirs to yours</h3><pre class="text" id="diff">{{range .Diff}}{{if eq (slice . 0 1) "-"}}<span class="del">{{.}}</span>{{else if eq (slice . 0 1) "+"}}<span class="add">{{.}}</span>{{else}}{{.}}{{end}}
{{end}}</pre>
{{else if eq .State "deleted"}}<div class="warn" id="conflict"><p><b>Someone deleted this page while you were editing it.</b>
Nothing of yours was lost: your text is in the box below. Press “Recreate the page with this text” to save it as the page again,
or leave this page to let the deletion stand.</p></div>{{end}}
<form method="post" action="/wiki/{{.Name}}/edit" id="editform">
<input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="base_etag" value="{{.BaseETag}}">
<input type="hidden" name="base_body" value="{{.BaseBody}}"><input type="hidden" name="conflict" value="{{.State}}">
<p><label>Your name <input name="author" id="author" value="{{.Author}}"></label></p>
<textarea name="body" id="body" rows="18">{{.Body}}</textarea>
<p>{{if eq .State "deleted"}}<button type="submit" name="action" value="save" id="recreate">Recreate the page with this text</button>
{{else}}<button type="submit" name="action" value="save" id="save">Save</button>{{end}}
{{if eq .State "changed"}}<button type="submit" name="action" value="overwrite" id="overwrite">Overwrite anyway with the text in the box</button>
(replaces the version saved meanwhile){{end}}</p></form>
{{template "foot"}}{{end}}
`))
