package imply

import (
	"context"
	"errors"
	"testing"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/request"
)

// entries implies one entry per write, or refuses with err; it counts the
// memo up at each call, and ends a refused write with end.
type entries struct {
	err, end error
	refused  []int // the implied actions it was told were refused
}

func (e *entries) Imply(_ context.Context, req request.Request, memo any) ([]driver.Action, any, error) {
	n, _ := memo.(int)
	if e.err != nil {
		return nil, n + 1, e.err
	}
	out := make([]driver.Action, len(req))
	for i, w := range req {
		out[i] = driver.Action{Key: "entry:" + w.Key}
	}
	return out, n + 1, nil
}

func (e *entries) Refused(_ context.Context, _ request.Request, _ []driver.Action, i int, _ error, memo any) (any, error) {
	e.refused = append(e.refused, i)
	return memo.(int) + 10, e.end
}

var doc = request.Request{request.DeleteOf("k", "e1")}

func TestPartActions(t *testing.T) {
	tests := []struct {
		name    string
		im      Implier
		req     request.Request
		commit  bool
		want    int   // actions implied
		wantErr error // matched with errors.Is
	}{
		{"no implier", nil, doc, true, 0, nil},
		{"checks alone imply nothing", &entries{}, request.Request{request.Check(request.Version{Item: driver.Item{Key: "k"}})}, true, 0, nil},
		{"one entry", &entries{}, doc, true, 1, nil},
		{"no commit refuses", &entries{}, doc, false, 0, errors.ErrUnsupported},
		{"the implier refuses", &entries{err: driver.ErrInvalidInput}, doc, true, 0, driver.ErrInvalidInput},
		{"unsupported names the write", &entries{err: errors.ErrUnsupported}, doc, true, 0, errors.ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Part{Implier: tt.im}
			got, err := p.Actions(t.Context(), tt.req, tt.commit, "delete", "k")
			if len(got) != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Actions = %d actions, %v; want %d, %v", len(got), err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPartRefused(t *testing.T) {
	implied := []driver.Action{{Key: "entry:k"}}
	stale := func(i int) error { return &driver.ActionError{Index: i, Err: driver.ErrConflict} }
	tests := []struct {
		name      string
		err, end  error
		again, ok bool
		wantErr   error
	}{
		{"not an action's", driver.ErrConflict, nil, false, false, driver.ErrConflict},
		{"the document's own action", stale(0), nil, false, false, driver.ErrConflict},
		{"past the implied actions", stale(2), nil, false, false, driver.ErrConflict},
		{"an implied action: again", stale(1), nil, true, true, driver.ErrConflict},
		{"an implied action: the end", stale(1), driver.ErrExists, false, true, driver.ErrExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &entries{end: tt.end}
			p := &Part{Implier: e}
			if _, err := p.Actions(t.Context(), doc, true, "delete", "k"); err != nil {
				t.Fatal(err)
			}
			ok, again, err := p.Refused(t.Context(), doc, implied, tt.err, "delete", "k")
			if again != tt.again || ok != tt.ok || !errors.Is(err, tt.wantErr) {
				t.Errorf("Refused = %v, %v, %v; want %v, %v, %v", again, err, ok, tt.again, tt.wantErr, tt.ok)
			}
			if ok && (len(e.refused) != 1 || e.refused[0] != 0 || p.memo != 11) {
				t.Errorf("the implier was told %v with memo %v; want [0] with 11", e.refused, p.memo)
			}
		})
	}
}
