package etaghttp_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// kanbanItem is a card or a board (one Store: one type per transaction).
type kanbanItem struct {
	Title string
	Count int    `json:",omitempty"` // a board's cards
	Board string `json:",omitempty"` // a card's board
}

var errStaleTag = errors.New("If-Match names an older version")

// deleteCard is a hand-written DELETE of /cards/{id}: it removes the card
// and decrements its board's count in one transaction, keeping the
// Handler's rules with the helpers: If-Match required (428), a stale one
// answered 412 with the current card. The client's stale tag is not an
// error matching ErrConflict inside fn (that would run fn again, to no
// end): fn keeps the conflict and returns errStaleTag.
func deleteCard(s *etagstore.Store[kanbanItem]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		held, ok := etaghttp.IfMatch(w, r)
		if !ok {
			return
		}
		key := "card." + strings.TrimPrefix(r.URL.Path, "/cards/")
		var stale *etagstore.ConflictError[kanbanItem]
		_, err := s.Transact(r.Context(), func(tx *etagstore.Tx[kanbanItem]) error {
			card, err := tx.Get(key)
			if err != nil {
				return err
			}
			if cur, _ := tx.ETag(key); held != etagstore.ETagAny && cur != held {
				stale = &etagstore.ConflictError[kanbanItem]{Key: key, ETag: held, Theirs: etagstore.Doc[kanbanItem]{Key: key, Value: card, ETag: cur}, Attempts: 1}
				return errStaleTag
			}
			board, err := tx.Get("board")
			if err != nil {
				return err
			}
			board.Count--
			return errors.Join(tx.Delete(key), tx.Put("board", board))
		})
		switch {
		case errors.Is(err, errStaleTag):
			etaghttp.WriteConflict(w, r, stale)
		case err != nil:
			http.Error(w, "storage error", http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}
}

func TestHandWrittenDeleteKeepsTheRules(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[kanbanItem](memstore.New(nil), nil)
	if _, err := s.Create(ctx, "board", kanbanItem{Title: "todo", Count: 1}); err != nil {
		t.Fatal(err)
	}
	old, err := s.Create(ctx, "card.1", kanbanItem{Title: "write tests"})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.Update(ctx, "card.1", func(c *kanbanItem) error { c.Title = "write more tests"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	h := deleteCard(s)

	resp, body := serve(h, "DELETE", "/cards/1", "", nil)
	if resp.StatusCode != http.StatusPreconditionRequired {
		t.Errorf("DELETE without If-Match: %d %s, want 428", resp.StatusCode, body)
	}
	resp, body = serve(h, "DELETE", "/cards/1", "", map[string]string{"If-Match": `"a", "b"`})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("DELETE with two tags: %d %s, want 400", resp.StatusCode, body)
	}
	for _, stale := range []string{etaghttp.FormatETag(old.ETag), `W/` + etaghttp.FormatETag(cur.ETag), `"never-made"`} {
		resp, body = serve(h, "DELETE", "/cards/1", "", map[string]string{"If-Match": stale})
		var p struct {
			Status      int
			Key         string
			CurrentETag string
			Current     kanbanItem
			Changes     []any
		}
		_ = json.Unmarshal([]byte(body), &p)
		if resp.StatusCode != http.StatusPreconditionFailed || p.CurrentETag != etaghttp.FormatETag(cur.ETag) ||
			p.Current.Title != "write more tests" || len(p.Changes) != 0 || p.Key != "/cards/1" || strings.Contains(body, "card.1") {
			t.Errorf("DELETE with If-Match %s: %d %s; want 412 holding the current card, naming the path, not the key", stale, resp.StatusCode, body)
		}
	}
	if b, _ := s.Get(ctx, "board"); b.Value.Count != 1 {
		t.Fatalf("after refused deletes the board counts %d, want 1", b.Value.Count)
	}
	resp, body = serve(h, "DELETE", "/cards/1", "", map[string]string{"If-Match": etaghttp.FormatETag(cur.ETag)})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE with the current tag: %d %s, want 204", resp.StatusCode, body)
	}
	if b, _ := s.Get(ctx, "board"); b.Value.Count != 0 {
		t.Errorf("after the delete the board counts %d, want 0", b.Value.Count)
	}
	if _, err := s.Get(ctx, "card.1"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("the card after its delete: %v, want ErrNotFound", err)
	}
}

// WriteConflict answers a write's lost race with what changed between the
// current document and the request's.
func TestWriteConflictShowsChanges(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[kanbanItem](memstore.New(nil), nil)
	old, err := s.Create(ctx, "card.2", kanbanItem{Title: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "card.2", func(c *kanbanItem) error { c.Title = "b"; return nil }); err != nil {
		t.Fatal(err)
	}
	old.Value.Title = "c"
	_, err = s.Replace(ctx, old)
	var ce *etagstore.ConflictError[kanbanItem]
	if !errors.As(err, &ce) {
		t.Fatalf("stale Replace: %v, want a *ConflictError", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { etaghttp.WriteConflict(w, r, ce) })
	resp, body := serve(h, "PUT", "/cards/2", "", nil)
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(body, `"changes":[{"path":"/Title","theirs":"b","mine":"c"}]`) || !strings.Contains(body, `"diff":`) {
		t.Errorf("WriteConflict: %d %s; want 412 with the Title change and its diff", resp.StatusCode, body)
	}
}

// HandlerOptions.Key maps a route to a key; no answer names the key: a
// problem names the request's path.
func TestHandlerKeyMapping(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[kanbanItem](memstore.New(nil), nil)
	d, err := s.Create(ctx, "b1.c7", kanbanItem{Title: "a"})
	if err != nil {
		t.Fatal(err)
	}
	h := etaghttp.Handler(s, &etaghttp.HandlerOptions[kanbanItem]{Key: func(r *http.Request) (string, error) {
		board, card, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/boards/"), "/cards/")
		if !ok || board == "" || card == "" {
			return "", errors.New("not a card's path")
		}
		return board + "." + card, nil
	}})
	if resp, body := serve(h, "GET", "/boards/b1/cards/c7", "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"Title":"a"`) {
		t.Errorf("GET a mapped card: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		method, path, body string
		hdr                map[string]string
		status             int
	}{
		{"GET", "/boards/b1/cards/c9", "", nil, http.StatusNotFound},
		{"PUT", "/boards/b1/cards/c7", `{"Title":"b"}`, map[string]string{"If-Match": `"stale"`}, http.StatusPreconditionFailed},
		{"PUT", "/boards/b1/cards/c7", `{"Title":"b"}`, nil, http.StatusPreconditionRequired},
		{"DELETE", "/boards/b1/cards/c7", "", map[string]string{"If-Match": etaghttp.FormatETag("x")}, http.StatusPreconditionFailed},
		{"GET", "/boards/b1", "", nil, http.StatusBadRequest},
	} {
		resp, body := serve(h, tc.method, tc.path, tc.body, tc.hdr)
		if resp.StatusCode != tc.status || strings.Contains(body, "b1.c") || !strings.Contains(body, strconv.Quote(tc.path)) {
			t.Errorf("%s %s: %d %s; want %d naming the path, not the key", tc.method, tc.path, resp.StatusCode, body, tc.status)
		}
	}
	if cur, _ := s.Get(ctx, "b1.c7"); cur.ETag != d.ETag {
		t.Error("a refused write changed the card")
	}
}

// auditRecord is what an app keeps beside each card in a Store of its
// own type, written in the same transaction as the card (etagstore.Transact).
type auditRecord struct {
	Writes int    // the card's writes committed through the Handler
	Last   string // the method of the last one
}

// audited is the app's part of a card's transaction: key's audit record
// counts one more write, by method.
func audited(tx *etagstore.Tx[auditRecord], key, method string) error {
	a, err := tx.Get("audit." + key)
	if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
		return err
	}
	a.Writes++
	a.Last = method
	return tx.Put("audit."+key, a)
}

// errAppRefused is the app's refusal after the Handler's write, in its own
// part of the transaction.
var errAppRefused = etaghttp.Error{Status: http.StatusUnprocessableEntity, Detail: "the audit refuses this write"}
