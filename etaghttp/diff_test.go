package etaghttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

type Task struct {
	Title   string            `json:"title"`
	Tags    []string          `json:"tags,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Updated time.Time         `json:"updated"` // set by the server
	Edits   int               `json:"edits"`   // set by the server
}

// A 412's changes name JSON members by JSON Pointer with both values, and
// leave out the members the server's Prepare sets.
func TestConflictChangesAreReadable(t *testing.T) {
	s := etagstore.New[Task](memstore.New(nil), nil)
	prepare := func(_ *http.Request, _ string, old, v *Task) error {
		v.Updated = time.Now()
		v.Edits = 1
		if old != nil {
			v.Edits = old.Edits + 1
		}
		return nil
	}
	srv := newServer(t, etaghttp.Handler(s, &etaghttp.HandlerOptions[Task]{Prepare: prepare}))
	base := Task{Title: "a", Tags: []string{"x", "y"}, Labels: map[string]string{"a/b": "1", "gone": "2"}, Updated: time.Unix(1, 0).UTC()}
	old, err := s.Create(t.Context(), "t", base)
	if err != nil {
		t.Fatal(err)
	}
	theirs := base
	theirs.Title, theirs.Updated, theirs.Edits = "b", time.Unix(2, 0).UTC(), 5
	if _, err := s.Replace(t.Context(), etagstore.Doc[Task]{Key: "t", Value: theirs, ETag: old.ETag}); err != nil {
		t.Fatal(err)
	}
	// Mine: read the old version, changed title, tag and labels.
	mine := `{"title":"c <&>","tags":["x","z"],"labels":{"a/b":"1","new":"3"},"updated":"1970-01-01T00:00:01Z","edits":0}`
	resp, body := do(t, srv, "PUT", "/t", mine, map[string]string{"If-Match": etaghttp.FormatETag(old.ETag)})
	var p etaghttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale PUT: %d %s", resp.StatusCode, body)
	}
	want := "/labels/gone: \"2\" → (none)\n" +
		"/labels/new: (none) → \"3\"\n" +
		"/tags/1: \"y\" → \"z\"\n" +
		"/title: \"b\" → \"c <&>\"\n"
	if diff := cmp.Diff(want, p.Diff); diff != "" {
		t.Errorf("diff (-want +got):\n%s\nbody %s", diff, body)
	}
	if len(p.Changes) != 4 || p.Changes[0].Path != "/labels/gone" || p.Changes[0].Mine != nil || string(p.Changes[0].Theirs) != `"2"` {
		t.Errorf("changes %+v", p.Changes)
	}
	// A member name holding "/" is escaped in its pointer (RFC 6901).
	resp, body = do(t, srv, "PATCH", "/t", `{"labels":{"a/b":"2"}}`, map[string]string{"If-Match": etaghttp.FormatETag(old.ETag)})
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusPreconditionFailed || p.Diff != "/labels/a~1b: \"1\" → \"2\"\n" {
		t.Errorf("stale PATCH: %d diff %q", resp.StatusCode, p.Diff)
	}
}

// racer lets another writer in just before the first write it is given.
type racer struct {
	driver.Backend
	once  sync.Once
	other func()
}

func (r *racer) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	r.once.Do(r.other)
	return r.Backend.Write(ctx, key, w)
}

// A write that loses between the handler's read and its own write gets the
// same readable 412, without the members Prepare sets.
func TestConflictInBetweenIsReadable(t *testing.T) {
	mem := memstore.New(nil)
	other := etagstore.New[Task](mem, nil)
	d, err := other.Create(t.Context(), "t", Task{Title: "a", Updated: time.Unix(1, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	r := &racer{Backend: mem}
	r.other = func() {
		if _, err := other.Replace(context.Background(), etagstore.Doc[Task]{Key: "t", ETag: d.ETag,
			Value: Task{Title: "theirs", Updated: time.Unix(2, 0).UTC(), Edits: 7}}); err != nil {
			t.Error(err)
		}
	}
	s := etagstore.New[Task](r, nil)
	prepare := func(_ *http.Request, _ string, old, v *Task) error {
		v.Updated, v.Edits = time.Now(), old.Edits+1
		return nil
	}
	srv := newServer(t, etaghttp.Handler(s, &etaghttp.HandlerOptions[Task]{Prepare: prepare}))
	resp, body := do(t, srv, "PUT", "/t", `{"title":"mine"}`, map[string]string{"If-Match": etaghttp.FormatETag(d.ETag)})
	var p etaghttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("PUT that lost in between: %d %s", resp.StatusCode, body)
	}
	if p.Diff != "/title: \"theirs\" → \"mine\"\n" {
		t.Errorf("diff %q, want the title only", p.Diff)
	}
}
