package etaghttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/memstore"
)

// kanbanHandler serves /cards/{id} with the Handler, every write in one
// transaction with the count of the card's board ("board.<name>"): a card
// created, moved (PATCH of Board) or deleted changes its boards' counts
// in the same commit.
func kanbanHandler(s *etagstore.Store[kanbanItem]) http.Handler {
	return etaghttp.Handler(s, &etaghttp.HandlerOptions[kanbanItem]{
		Key: func(r *http.Request) (string, error) {
			id, ok := strings.CutPrefix(r.URL.Path, "/cards/")
			if !ok || id == "" || strings.Contains(id, "/") {
				return "", errors.New("not a card")
			}
			return "card." + id, nil
		},
		Transact: func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
			_, err := s.Transact(r.Context(), func(tx *etagstore.Tx[kanbanItem]) error {
				before, err := tx.Get(key)
				existed := err == nil
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				if err := write(tx); err != nil {
					return err
				}
				after, err := tx.Get(key)
				if existed {
					if err := count(tx, before.Board, -1); err != nil {
						return err
					}
				}
				if err == nil {
					return count(tx, after.Board, +1)
				}
				return nil
			})
			return err
		},
	})
}

// count adds n to the count of board.
func count(tx *etagstore.Tx[kanbanItem], board string, n int) error {
	b, err := tx.Get("board." + board)
	if err != nil {
		return err
	}
	b.Count += n
	return tx.Put("board."+board, b)
}

// The Handler's writes run inside the app's transaction
// (HandlerOptions.Transact) and keep every conditional rule: 428 without
// If-Match; a stale one answered 412 with the current card and, for a
// PATCH, what it would have changed; If-None-Match: * refused on an
// existing card; nothing of the app's own writes committed after a
// refusal, and both counts moved with the card in one commit otherwise.
func TestHandlerInTheAppsTransaction(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[kanbanItem](memstore.New(nil), nil)
	for _, b := range []string{"todo", "done"} {
		if _, err := s.Create(ctx, "board."+b, kanbanItem{Title: b}); err != nil {
			t.Fatal(err)
		}
	}
	h := kanbanHandler(s)
	counts := func() (todo, done int) {
		a, _ := s.Get(ctx, "board.todo")
		b, _ := s.Get(ctx, "board.done")
		return a.Value.Count, b.Value.Count
	}
	resp, body := serve(h, "PUT", "/cards/1", `{"Title":"write tests","Board":"todo"}`, map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("ETag") == "" {
		t.Fatalf("PUT If-None-Match: * = %d %s, want 201 with an ETag", resp.StatusCode, body)
	}
	old := resp.Header.Get("ETag")
	if todo, done := counts(); todo != 1 || done != 0 {
		t.Fatalf("after the create: todo %d, done %d; want 1, 0", todo, done)
	}
	resp, body = serve(h, "PUT", "/cards/1", `{"Title":"again","Board":"todo"}`, map[string]string{"If-None-Match": "*"})
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(body, "already exists") {
		t.Errorf("PUT If-None-Match: * of an existing card = %d %s, want 412", resp.StatusCode, body)
	}
	cur, err := s.Update(ctx, "card.1", func(c *kanbanItem) error { c.Title = "write more tests"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	tag := etaghttp.FormatETag(cur.ETag)

	resp, body = serve(h, "DELETE", "/cards/1", "", nil)
	if resp.StatusCode != http.StatusPreconditionRequired {
		t.Errorf("DELETE without If-Match: %d %s, want 428", resp.StatusCode, body)
	}
	var p struct {
		Key         string
		CurrentETag string
		Current     kanbanItem
		Changes     []struct{ Path, Theirs, Mine any }
	}
	resp, body = serve(h, "DELETE", "/cards/1", "", map[string]string{"If-Match": old})
	t.Logf("the kanban DELETE with a stale If-Match: %d %s", resp.StatusCode, body)
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusPreconditionFailed ||
		p.CurrentETag != tag || p.Current.Title != "write more tests" || len(p.Changes) != 0 || p.Key != "/cards/1" || strings.Contains(body, "card.1") {
		t.Errorf("stale DELETE: %d %s; want 412 with the current card, naming the path", resp.StatusCode, body)
	}
	p.Changes = nil
	resp, body = serve(h, "PATCH", "/cards/1", `{"Board":"done"}`, map[string]string{"If-Match": old})
	t.Logf("the kanban PATCH with a stale If-Match: %d %s", resp.StatusCode, body)
	if err := json.Unmarshal([]byte(body), &p); err != nil || resp.StatusCode != http.StatusPreconditionFailed ||
		len(p.Changes) != 1 || p.Changes[0].Path != "/Board" || p.Changes[0].Theirs != "todo" || p.Changes[0].Mine != "done" {
		t.Errorf("stale PATCH: %d %s; want 412 with the change of /Board from todo to done", resp.StatusCode, body)
	}
	if todo, done := counts(); todo != 1 || done != 0 {
		t.Fatalf("after refused writes: todo %d, done %d; want 1, 0", todo, done)
	}

	resp, body = serve(h, "PATCH", "/cards/1", `{"Board":"done"}`, map[string]string{"If-Match": tag})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" || !strings.Contains(body, `"Board":"done"`) {
		t.Fatalf("PATCH with the current tag: %d %s, want 200 with the moved card and its ETag", resp.StatusCode, body)
	}
	if todo, done := counts(); todo != 0 || done != 1 {
		t.Fatalf("after the move: todo %d, done %d; want 0, 1", todo, done)
	}
	resp, body = serve(h, "DELETE", "/cards/1", "", map[string]string{"If-Match": resp.Header.Get("ETag")})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE with the current tag: %d %s, want 204", resp.StatusCode, body)
	}
	if todo, done := counts(); todo != 0 || done != 0 {
		t.Errorf("after the delete: todo %d, done %d; want 0, 0", todo, done)
	}
	if _, err := s.Get(ctx, "card.1"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("the card after its delete: %v, want ErrNotFound", err)
	}
	resp, body = serve(h, "DELETE", "/cards/1", "", map[string]string{"If-Match": "*"})
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(body, "does not exist") {
		t.Errorf("DELETE If-Match: * of a missing card: %d %s, want 412", resp.StatusCode, body)
	}
	resp, body = serve(h, "PATCH", "/cards/2", `{"Board":"nowhere"}`, map[string]string{"If-Match": "*"})
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("PATCH If-Match: * of a missing card: %d %s, want 412", resp.StatusCode, body)
	}
}

// Racing moves and creates through the Handler's transactions: the boards'
// counts always add up to the cards on them.
func TestHandlerTransactionsKeepCountsUnderRaces(t *testing.T) {
	ctx := t.Context()
	s := etagstore.New[kanbanItem](memstore.New(nil), nil)
	for _, b := range []string{"todo", "done"} {
		if _, err := s.Create(ctx, "board."+b, kanbanItem{Title: b}); err != nil {
			t.Fatal(err)
		}
	}
	h := kanbanHandler(s)
	if resp, body := serve(h, "PUT", "/cards/0", `{"Board":"todo"}`, map[string]string{"If-None-Match": "*"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				board := []string{"todo", "done"}[(g+i)%2]
				if resp, body := serve(h, "PATCH", "/cards/0", `{"Board":"`+board+`"}`, map[string]string{"If-Match": "*"}); resp.StatusCode != http.StatusOK {
					t.Errorf("move: %d %s", resp.StatusCode, body)
				}
				if i%5 == 0 {
					path := "/cards/" + strconv.Itoa(g*10+i+1)
					if resp, body := serve(h, "PUT", path, `{"Board":"`+board+`"}`, map[string]string{"If-None-Match": "*"}); resp.StatusCode != http.StatusCreated {
						t.Errorf("create: %d %s", resp.StatusCode, body)
					}
				}
			}
		})
	}
	wg.Wait()
	on := map[string]int{}
	for d, err := range s.List(ctx, "card.") {
		if err != nil {
			t.Fatal(err)
		}
		on[d.Value.Board]++
	}
	for _, b := range []string{"todo", "done"} {
		d, err := s.Get(ctx, "board."+b)
		if err != nil || d.Value.Count != on[b] {
			t.Errorf("board %s counts %d (%v), %d cards are on it", b, d.Value.Count, err, on[b])
		}
	}
	if on["todo"]+on["done"] != 17 {
		t.Errorf("%v cards, want 17", on)
	}
}

// The kanban DELETE whose transaction lost a race (the board changed after
// the transaction read it) is retried by the Store, and the Store's log
// record of that retry carries the trace id and span id of the
// etagstore.Transact span the DELETE ran in.
func TestKanbanDeleteLogsCarryTheTrace(t *testing.T) {
	ctx := t.Context()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var logs bytes.Buffer
	s := etagstore.New[kanbanItem](memstore.New(nil), &etagstore.Options{
		TracerProvider: tp,
		Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if _, err := s.Create(ctx, "board.todo", kanbanItem{Title: "todo", Count: 1}); err != nil {
		t.Fatal(err)
	}
	card, err := s.Create(ctx, "card.1", kanbanItem{Title: "t", Board: "todo"})
	if err != nil {
		t.Fatal(err)
	}
	other := etagstore.New[kanbanItem](s.Backend(), nil)
	raced := false
	h := etaghttp.Handler(s, &etaghttp.HandlerOptions[kanbanItem]{
		Key: func(r *http.Request) (string, error) { return "card." + strings.TrimPrefix(r.URL.Path, "/cards/"), nil },
		Transact: func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
			_, err := s.Transact(r.Context(), func(tx *etagstore.Tx[kanbanItem]) error {
				if err := write(tx); err != nil {
					return err
				}
				b, err := tx.Get("board.todo")
				if err != nil {
					return err
				}
				if !raced { // another writer changes the board after this read
					raced = true
					if _, err := other.Update(context.Background(), "board.todo", func(b *kanbanItem) error { b.Title = "To do"; return nil }); err != nil {
						return err
					}
				}
				b.Count--
				return tx.Put("board.todo", b)
			})
			return err
		},
	})
	resp, body := serve(h, "DELETE", "/cards/1", "", map[string]string{"If-Match": etaghttp.FormatETag(card.ETag)})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s, want 204", resp.StatusCode, body)
	}
	if b, _ := s.Get(ctx, "board.todo"); b.Value.Count != 0 || b.Value.Title != "To do" {
		t.Fatalf("board after the delete: %+v, want count 0 and the other writer's title", b.Value)
	}
	var tx tracetest.SpanStub
	for _, sp := range spans.GetSpans() {
		if sp.Name == "etagstore.Transact" {
			tx = sp
		}
	}
	line, _, _ := strings.Cut(logs.String(), "\n")
	t.Logf("log line: %s", line)
	want := "trace_id=" + tx.SpanContext.TraceID().String() + " span_id=" + tx.SpanContext.SpanID().String()
	if !tx.SpanContext.IsValid() || !strings.Contains(line, "etagstore: retrying") || !strings.Contains(line, want) {
		t.Errorf("the retry's log line %q does not carry the Transact span's %s", line, want)
	}
}
