package etaghttp_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// titled is a card whose title is unique (case-insensitively).
type titled struct {
	Title string `json:"title"`
	Label string `json:"label,omitempty"`
}

var byTitle = etagstore.Unique("title", func(c titled) string { return strings.ToLower(c.Title) })

// uniqueProblem checks that an answer is the 409 of a unique index's
// refusal naming index "title", value and heldBy ("" : left out), key
// the request's, and no other member.
func uniqueProblem(t *testing.T, what string, resp *http.Response, body, key, value, heldBy string) {
	t.Helper()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("%s: %d %s, want 409", what, resp.StatusCode, body)
		return
	}
	p := problemOf(t, resp, body)
	if p.Type != etaghttp.ProblemUnique || p.Title != "The value is taken" || p.Status != http.StatusConflict ||
		p.Key != key || p.Index != "title" || p.Value != value || p.HeldBy != heldBy || p.Detail == "" {
		t.Errorf("%s: problem %s; want type %s, key %q, index title, value %q, heldBy %q", what, body, etaghttp.ProblemUnique, key, value, heldBy)
	}
	var members map[string]any
	_ = json.Unmarshal([]byte(body), &members)
	want := []string{"type", "title", "status", "detail", "key", "index", "value"}
	if heldBy != "" {
		want = append(want, "heldBy")
	}
	if got := slices.Sorted(maps.Keys(members)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s: members %v, want %v", what, got, want)
	}
}

// unchanged checks that the Store holds exactly docs (key → title): a
// refused write wrote nothing.
func unchanged(t *testing.T, s *etagstore.Store[titled], docs map[string]string) {
	t.Helper()
	got := map[string]string{}
	for d, err := range s.List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		got[d.Key] = d.Value.Title
	}
	if !maps.Equal(got, docs) {
		t.Errorf("stored %v, want %v", got, docs)
	}
	for key, title := range docs {
		if title == "" {
			continue
		}
		if d, err := s.GetBy(t.Context(), byTitle, strings.ToLower(title)); err != nil || d.Key != key {
			t.Errorf("GetBy %q: %q %v, want %q", title, d.Key, err, key)
		}
	}
}

// A write that would give a card a title another card holds is 409 with a
// problem naming the index, the value and the card holding it, and writes
// nothing: a create (PUT with If-None-Match: *), a PUT replacing with
// If-Match of the current tag or *, and a PATCH with either.
func TestUniqueIndexRefusalIs409(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New(memstore.New(nil), nil, byTitle)
	srv := newServer(t, etaghttp.Handler(s, nil))
	resp, body := do(t, srv, "PUT", "/c1", `{"title":"Ship it"}`, map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create c1: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, "PUT", "/c2", `{"title":"ship IT"}`, map[string]string{"If-None-Match": "*"})
	t.Logf("a create taking a held title: %d %s", resp.StatusCode, body)
	uniqueProblem(t, "create", resp, body, "c2", "ship it", "c1")
	if _, err := s.Get(ctx, "c2"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("c2 after the refused create: %v, want ErrNotFound", err)
	}
	unchanged(t, s, map[string]string{"c1": "Ship it"})

	resp, body = do(t, srv, "PUT", "/c2", `{"title":"Test it"}`, map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create c2: %d %s", resp.StatusCode, body)
	}
	tag := resp.Header.Get("ETag")
	for _, tc := range []struct{ method, body, ifMatch string }{
		{"PUT", `{"title":"SHIP IT"}`, tag},
		{"PUT", `{"title":"SHIP IT"}`, "*"},
		{"PATCH", `{"title":"Ship It"}`, tag},
		{"PATCH", `{"title":"Ship It"}`, "*"},
	} {
		what := tc.method + " If-Match: " + tc.ifMatch
		resp, body = do(t, srv, tc.method, "/c2", tc.body, map[string]string{"If-Match": tc.ifMatch})
		uniqueProblem(t, what, resp, body, "c2", "ship it", "c1")
		if d, err := s.Get(ctx, "c2"); err != nil || etaghttp.FormatETag(d.ETag) != tag {
			t.Errorf("%s: c2 is %+v %v, want its version before", what, d, err)
		}
		unchanged(t, s, map[string]string{"c1": "Ship it", "c2": "Test it"})
	}

	// The held value freed, the same PATCH is taken.
	resp, body = do(t, srv, "DELETE", "/c1", "", map[string]string{"If-Match": "*"})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE c1: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, "PATCH", "/c2", `{"title":"Ship It"}`, map[string]string{"If-Match": tag})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH to a freed title: %d %s, want 200", resp.StatusCode, body)
	}
	unchanged(t, s, map[string]string{"c2": "Ship It"})
}

// Under HandlerOptions.Key (keys are the server's) the problem names the
// request's path and the index and value, never the holder's key; a
// holder's key CheckKey refuses is left out too.
func TestUniqueIndexRefusalKeepsKeys(t *testing.T) {
	s := etagstore.New(memstore.New(nil), nil, byTitle)
	if _, err := s.Create(t.Context(), "card.1", titled{Title: "Ship it"}); err != nil {
		t.Fatal(err)
	}
	mapped := newServer(t, etaghttp.Handler(s, &etaghttp.HandlerOptions[titled]{
		Key: func(r *http.Request) (string, error) {
			id, ok := strings.CutPrefix(r.URL.Path, "/cards/")
			if !ok || id == "" {
				return "", errors.New("not a card")
			}
			return "card." + id, nil
		},
	}))
	resp, body := do(t, mapped, "PUT", "/cards/2", `{"title":"ship it"}`, map[string]string{"If-None-Match": "*"})
	uniqueProblem(t, "mapped create", resp, body, "/cards/2", "ship it", "")
	if strings.Contains(body, "card.") {
		t.Errorf("the answer shows a Store key: %s", body)
	}

	checked := newServer(t, etaghttp.Handler(s, &etaghttp.HandlerOptions[titled]{
		CheckKey: func(key string) error {
			if !strings.HasPrefix(key, "public.") {
				return errors.New("not served")
			}
			return nil
		},
	}))
	resp, body = do(t, checked, "PUT", "/public.2", `{"title":"ship it"}`, map[string]string{"If-None-Match": "*"})
	uniqueProblem(t, "create next to an unserved holder", resp, body, "public.2", "ship it", "")
	unchanged(t, s, map[string]string{"card.1": "Ship it"})
}

// Under HandlerOptions.Transact a unique index's refusal is answered the
// same, and nothing of the transaction is written: the Handler's own
// write (heldBy named), and a write of the app's own in the transaction
// (heldBy left out: the refused document is not the request's).
func TestUniqueIndexRefusalInTransact(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New(memstore.New(nil), nil, byTitle)
	if _, err := s.Create(ctx, "c1", titled{Title: "Ship it"}); err != nil {
		t.Fatal(err)
	}
	h := etaghttp.Handler(s, &etaghttp.HandlerOptions[titled]{
		Transact: func(r *http.Request, key string, write func(*etagstore.Tx[titled]) error) error {
			_, err := s.Transact(r.Context(), func(tx *etagstore.Tx[titled]) error {
				if err := tx.Put("log."+key, titled{Label: r.Method}); err != nil {
					return err
				}
				if err := write(tx); err != nil {
					return err
				}
				if r.Header.Get("X-Copy") == "" {
					return nil
				}
				c, err := tx.Get(key) // the app's own write: a copy taking the same title
				if err != nil {
					return err
				}
				return tx.Put("copy."+key, c)
			})
			return err
		},
	})
	srv := newServer(t, h)
	resp, body := do(t, srv, "PUT", "/c2", `{"title":"SHIP it"}`, map[string]string{"If-None-Match": "*"})
	uniqueProblem(t, "create in Transact", resp, body, "c2", "ship it", "c1")
	unchanged(t, s, map[string]string{"c1": "Ship it"})

	resp, body = do(t, srv, "PUT", "/c2", `{"title":"Test it"}`, map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create c2 in Transact: %d %s", resp.StatusCode, body)
	}
	tag := resp.Header.Get("ETag")
	for _, tc := range []struct{ method, body, ifMatch string }{
		{"PUT", `{"title":"ship it"}`, tag},
		{"PATCH", `{"title":"ship it"}`, "*"},
	} {
		what := tc.method + " If-Match: " + tc.ifMatch + " in Transact"
		resp, body = do(t, srv, tc.method, "/c2", tc.body, map[string]string{"If-Match": tc.ifMatch})
		uniqueProblem(t, what, resp, body, "c2", "ship it", "c1")
	}
	resp, body = do(t, srv, "PATCH", "/c2", `{"label":"x"}`, map[string]string{"If-Match": tag, "X-Copy": "1"})
	uniqueProblem(t, "the app's own write in Transact", resp, body, "c2", "test it", "")
	unchanged(t, s, map[string]string{"c1": "Ship it", "c2": "Test it", "log.c2": ""})
}
