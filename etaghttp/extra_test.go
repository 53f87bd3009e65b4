package etaghttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// RecV2 is Rec as a newer version of the app has it.
type RecV2 struct {
	Rec
	Priority int
	Labels   []string
	Nested   InnerV2 // shadows Rec's: the newer Inner has a member more
}

// InnerV2 is Inner as the newer version has it.
type InnerV2 struct {
	X    string
	N    int64
	Zone string
}

// A server whose T lacks fields a newer version wrote keeps them: its PUT
// and PATCH replace the representation it serves, not members it cannot
// see, at any depth (Nested.Zone, inside a member the PUT changes).
func TestWritesKeepMembersTheServerDoesNotKnow(t *testing.T) {
	b := memstore.New(nil)
	newer := etagstore.New[RecV2](b, nil)
	srv, _ := newRecServer(t, b)
	want := RecV2{Rec: Rec{Title: "v2"}, Priority: 7, Labels: []string{"a"}, Nested: InnerV2{X: "old", Zone: "eu"}}
	if _, err := newer.Create(t.Context(), "k", want); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		method, ctype, body, title string
	}{
		{http.MethodPut, "application/json", `{"Title":"put by v1","Big":1,"U":2,"Nested":{"X":"x","N":3}}`, "put by v1"},
		{http.MethodPatch, "application/merge-patch+json", `{"Title":"patched by v1"}`, "patched by v1"},
	} {
		cur, err := newer.Get(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(step.method, srv.URL+"/k", strings.NewReader(step.body))
		req.Header.Set("Content-Type", step.ctype)
		req.Header.Set("If-Match", etaghttp.FormatETag(cur.ETag))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", step.method, resp.Status)
		}
		got, err := newer.Get(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if got.Value.Title != step.title || got.Value.Priority != want.Priority || !cmp.Equal(got.Value.Labels, want.Labels) ||
			got.Value.Nested != (InnerV2{X: "x", N: 3, Zone: "eu"}) {
			t.Errorf("after a %s by a server without Priority and Labels: %+v", step.method, got.Value)
		}
	}
}
