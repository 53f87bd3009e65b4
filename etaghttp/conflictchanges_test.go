package etaghttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// change is one entry of a 412's changes, its values as JSON text.
type change struct{ Path, Theirs, Mine string }

func changesOf(t *testing.T, body string) []change {
	t.Helper()
	var p etaghttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("412 body %q: %v", body, err)
	}
	var out []change
	for _, c := range p.Changes {
		out = append(out, change{c.Path, string(c.Theirs), string(c.Mine)})
	}
	return out
}

// A 412's changes are what the client's write would change in the current
// version (the body's current), not what changed since the client's
// version: a stale PATCH lists only the members it names and would set to
// another value; a stale PUT also lists a member another writer changed
// that the PUT's body holds as the client read it (the PUT would undo it).
// When another write lands between the Handler's read and its write, a
// PATCH's changes are still against that new current version (applied to
// the version read, they would seem to undo the write in between).
func TestConflictChangesAreAgainstCurrent(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[Page](memstore.New(nil), nil)
	base, err := s.Create(ctx, "p", Page{Title: "a", Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "p", func(p *Page) error { p.Body = "y"; return nil }); err != nil { // another writer
		t.Fatal(err)
	}
	h := etaghttp.Handler(s, nil)
	stale := map[string]string{"If-Match": etaghttp.FormatETag(base.ETag)}
	for _, tc := range []struct {
		method, body string
		want         []change
	}{
		{"PATCH", `{"title":"b"}`, []change{{"/title", `"a"`, `"b"`}}},
		{"PATCH", `{"title":"b","body":"y"}`, []change{{"/title", `"a"`, `"b"`}}}, // body already holds y
		{"PUT", `{"title":"b","body":"x"}`, []change{{"/body", `"y"`, `"x"`}, {"/title", `"a"`, `"b"`}}},
	} {
		resp, body := serve(h, tc.method, "/p", tc.body, stale)
		if got := changesOf(t, body); resp.StatusCode != http.StatusPreconditionFailed || !slices.Equal(got, tc.want) {
			t.Errorf("stale %s %s: %d changes %v, want 412 with %v", tc.method, tc.body, resp.StatusCode, got, tc.want)
		}
	}

	// A write in between the Handler's read and its write: Prepare (which
	// runs between them) lets another writer change the body, once.
	for _, tc := range []struct {
		method, body string
		want         []change
	}{
		{"PATCH", `{"title":"c"}`, []change{{"/title", `"a"`, `"c"`}}},
		{"PUT", `{"title":"c","body":"y"}`, []change{{"/body", `"z"`, `"y"`}, {"/title", `"a"`, `"c"`}}},
	} {
		cur, err := s.Update(ctx, "p", func(p *Page) error { p.Body = "y"; return nil })
		if err != nil {
			t.Fatal(err)
		}
		raced := false
		h := etaghttp.Handler(s, &etaghttp.HandlerOptions[Page]{
			Prepare: func(_ *http.Request, key string, _, _ *Page) error {
				if !raced {
					raced = true
					_, err := s.Update(context.WithoutCancel(ctx), key, func(p *Page) error { p.Body = "z"; return nil })
					return err
				}
				return nil
			},
		})
		resp, body := serve(h, tc.method, "/p", tc.body, map[string]string{"If-Match": etaghttp.FormatETag(cur.ETag)})
		var p struct{ Current Page }
		_ = json.Unmarshal([]byte(body), &p)
		if got := changesOf(t, body); resp.StatusCode != http.StatusPreconditionFailed || p.Current.Body != "z" || !slices.Equal(got, tc.want) {
			t.Errorf("%s %s raced: %d %s: changes %v, want 412 with the current body z and %v", tc.method, tc.body, resp.StatusCode, body, got, tc.want)
		}
	}
}
