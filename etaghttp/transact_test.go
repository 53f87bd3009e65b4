package etaghttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// transactHook is a HandlerOptions.Transact hook for cards, whose app
// keeps an audit record through audit (another type, the same backend).
type transactHook func(cards *etagstore.Store[kanbanItem], audit *etagstore.Store[auditRecord]) func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error

// refuses reports whether the request asks the app to refuse its write
// (X-Refuse), after the app's own writes and the Handler's.
func refuses(r *http.Request) error {
	if r.Header.Get("X-Refuse") != "" {
		return errAppRefused
	}
	return nil
}

// The documented forms of HandlerOptions.Transact: over etagstore.Transact
// with the app's writes through a Store of another type after write,
// before it, or left out; over Store.Transact of the Handler's Store with
// the app's writes (through the same Store) and without.
var transactForms = []struct {
	name string
	hook transactHook
	// record reads the app's audit record of key, where the form keeps
	// it; nil: the form writes none.
	record func(t *testing.T, cards *etagstore.Store[kanbanItem], audit *etagstore.Store[auditRecord], key string) auditRecord
}{
	{"etagstore.Transact, the app's writes after write", func(cards *etagstore.Store[kanbanItem], audit *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
		return func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
			return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error {
				if err := write(cards.In(tx)); err != nil {
					return err
				}
				if err := audited(audit.In(tx), key, r.Method); err != nil {
					return err
				}
				return refuses(r)
			})
		}
	}, auditOf},
	{"etagstore.Transact, the app's writes before write", func(cards *etagstore.Store[kanbanItem], audit *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
		return func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
			return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error {
				if err := audited(audit.In(tx), key, r.Method); err != nil {
					return err
				}
				if err := write(cards.In(tx)); err != nil {
					return err
				}
				return refuses(r)
			})
		}
	}, auditOf},
	{"etagstore.Transact, the app's writes left out", func(cards *etagstore.Store[kanbanItem], _ *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
		return func(r *http.Request, _ string, write func(*etagstore.Tx[kanbanItem]) error) error {
			return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error { return write(cards.In(tx)) })
		}
	}, nil},
	{"Store.Transact, the app's writes after write", func(cards *etagstore.Store[kanbanItem], _ *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
		return func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
			_, err := cards.Transact(r.Context(), func(tx *etagstore.Tx[kanbanItem]) error {
				if err := write(tx); err != nil {
					return err
				}
				a, err := tx.Get("audit." + key) // kept in the cards' Store: Count, the writes; Title, the last method
				if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
					return err
				}
				if err := tx.Put("audit."+key, kanbanItem{Title: r.Method, Count: a.Count + 1}); err != nil {
					return err
				}
				return refuses(r)
			})
			return err
		}
	}, func(t *testing.T, cards *etagstore.Store[kanbanItem], _ *etagstore.Store[auditRecord], key string) auditRecord {
		t.Helper()
		d, err := cards.Get(t.Context(), "audit."+key)
		if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
			t.Fatal(err)
		}
		return auditRecord{Writes: d.Value.Count, Last: d.Value.Title}
	}},
	{"Store.Transact, the app's writes left out", func(cards *etagstore.Store[kanbanItem], _ *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
		return func(r *http.Request, _ string, write func(*etagstore.Tx[kanbanItem]) error) error {
			_, err := cards.Transact(r.Context(), func(tx *etagstore.Tx[kanbanItem]) error { return write(tx) })
			return err
		}
	}, nil},
}

// auditOf reads key's audit record from audit.
func auditOf(t *testing.T, _ *etagstore.Store[kanbanItem], audit *etagstore.Store[auditRecord], key string) auditRecord {
	t.Helper()
	d, err := audit.Get(t.Context(), "audit."+key)
	if err != nil && !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatal(err)
	}
	return d.Value
}

// Every documented form of HandlerOptions.Transact: a write the Handler
// answers 2xx committed with the app's own writes (the audit record moved
// with the card), and its answer carries the document and the ETag the
// commit gave it, which the next If-Match accepts; a refusal, the
// Handler's (412) or the app's (its Error, after both parts wrote),
// commits neither.
func TestHandlerTransactForms(t *testing.T) {
	for _, form := range transactForms {
		t.Run(form.name, func(t *testing.T) {
			ctx := t.Context()
			b := memstore.New(nil)
			cards := etagstore.New[kanbanItem](b, nil)
			audit := etagstore.New[auditRecord](b, nil)
			h := etaghttp.Handler(cards, &etaghttp.HandlerOptions[kanbanItem]{Transact: form.hook(cards, audit)})
			want := auditRecord{}
			check := func(step string, resp *http.Response, body string, status int, title string) string {
				t.Helper()
				if resp.StatusCode != status {
					t.Fatalf("%s: %d %s, want %d", step, resp.StatusCode, body, status)
				}
				d, err := cards.Get(ctx, "card.1")
				switch {
				case title == "" && !errors.Is(err, etagstore.ErrNotFound):
					t.Errorf("%s: the card is %+v (%v), want it deleted", step, d.Value, err)
				case title != "" && (err != nil || d.Value.Title != title):
					t.Errorf("%s: the card is %+v (%v), want the title %q", step, d.Value, err, title)
				case status < 300 && title != "" && (resp.Header.Get("ETag") != etaghttp.FormatETag(d.ETag) || !strings.Contains(body, `"Title":"`+title+`"`)):
					t.Errorf("%s: answered ETag %q and %s; the commit stored %q, %+v", step, resp.Header.Get("ETag"), body, etaghttp.FormatETag(d.ETag), d.Value)
				}
				if form.record != nil {
					if got := form.record(t, cards, audit, "card.1"); got != want {
						t.Errorf("%s: the audit record is %+v, want %+v (committed with the card, or not at all)", step, got, want)
					}
				}
				return resp.Header.Get("ETag")
			}

			resp, body := serve(h, "PUT", "/card.1", `{"Title":"a"}`, map[string]string{"If-None-Match": "*"})
			want = auditRecord{1, "PUT"}
			created := check("PUT If-None-Match: *", resp, body, http.StatusCreated, "a")
			resp, body = serve(h, "PATCH", "/card.1", `{"Title":"b"}`, map[string]string{"If-Match": created})
			want = auditRecord{2, "PATCH"}
			patched := check("PATCH", resp, body, http.StatusOK, "b")
			resp, body = serve(h, "PATCH", "/card.1", `{"Title":"c"}`, map[string]string{"If-Match": created})
			check("PATCH with a stale If-Match", resp, body, http.StatusPreconditionFailed, "b")
			if form.record != nil {
				resp, body = serve(h, "PATCH", "/card.1", `{"Title":"c"}`, map[string]string{"If-Match": patched, "X-Refuse": "1"})
				check("PATCH the app refuses", resp, body, errAppRefused.Status, "b")
				if !strings.Contains(body, errAppRefused.Detail) {
					t.Errorf("PATCH the app refuses: %s, want its detail", body)
				}
			}
			resp, body = serve(h, "PUT", "/card.1", `{"Title":"d"}`, map[string]string{"If-Match": patched})
			want = auditRecord{3, "PUT"}
			put := check("PUT If-Match", resp, body, http.StatusOK, "d")
			resp, body = serve(h, "DELETE", "/card.1", "", map[string]string{"If-Match": put})
			want = auditRecord{4, "DELETE"}
			check("DELETE", resp, body, http.StatusNoContent, "")
		})
	}
}

// Racing PATCHes whose hook runs etagstore.Transact over the card and its
// audit record (group commit puts several in one commit): the record
// counts every write answered 200, and the ETag of the stored version is
// one the answers carried.
func TestHandlerTransactWithAnotherStoreUnderRaces(t *testing.T) {
	ctx := t.Context()
	b := memstore.New(nil)
	cards := etagstore.New[kanbanItem](b, nil)
	audit := etagstore.New[auditRecord](b, nil)
	h := etaghttp.Handler(cards, &etaghttp.HandlerOptions[kanbanItem]{Transact: transactForms[0].hook(cards, audit)})
	if resp, body := serve(h, "PUT", "/card.1", `{"Title":"a"}`, map[string]string{"If-None-Match": "*"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	var (
		mu   sync.Mutex
		tags = map[string]bool{}
		wg   sync.WaitGroup
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				resp, body := serve(h, "PATCH", "/card.1", `{"Count":`+strconv.Itoa(g*5+i)+`}`, map[string]string{"If-Match": "*"})
				if resp.StatusCode != http.StatusOK {
					t.Errorf("PATCH: %d %s", resp.StatusCode, body)
				}
				mu.Lock()
				tags[resp.Header.Get("ETag")] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	d, err := cards.Get(ctx, "card.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d distinct ETags answered; answers without one (a PATCH a later one of its batch superseded): %v", len(tags), tags[""])
	if !tags[etaghttp.FormatETag(d.ETag)] {
		t.Errorf("the stored ETag %s is in no answer (%d ETags answered)", etaghttp.FormatETag(d.ETag), len(tags))
	}
	if a := auditOf(t, cards, audit, "card.1"); a.Writes != 41 {
		t.Errorf("the audit record counts %d writes, want 41", a.Writes)
	}
}

// A hook that does not let the Handler's write commit is the app's
// mistake: 500 "storage error", its cause at the Logger, never a 2xx
// answer with a document the commit does not hold.
func TestHandlerTransactMistakes(t *testing.T) {
	errSwallowed := errors.New("swallowed")
	for _, tc := range []struct {
		name         string
		method, body string
		hdr          map[string]string
		hook         transactHook
		cause        string
	}{
		{"write never called", "PATCH", `{"Title":"b"}`, map[string]string{"If-Match": "*"},
			func(_ *etagstore.Store[kanbanItem], audit *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
				return func(r *http.Request, key string, _ func(*etagstore.Tx[kanbanItem]) error) error {
					return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error { return audited(audit.In(tx), key, r.Method) })
				}
			}, "without calling write"},
		{"key deleted after write", "PUT", `{"Title":"b"}`, map[string]string{"If-Match": "*"},
			func(cards *etagstore.Store[kanbanItem], _ *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
				return func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
					return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error {
						if err := write(cards.In(tx)); err != nil {
							return err
						}
						return cards.In(tx).Delete(key)
					})
				}
			}, "committed no document"},
		{"write's transaction not committed, create", "PUT", `{"Title":"b"}`, map[string]string{"If-None-Match": "*"},
			swallowing(errSwallowed), "committed no document"},
		{"write's transaction not committed, PATCH", "PATCH", `{"Title":"b"}`, map[string]string{"If-Match": "*"},
			swallowing(errSwallowed), "committed no document"},
		{"the run that committed did not call write", "PATCH", `{"Title":"b"}`, map[string]string{"If-Match": "*"},
			func(cards *etagstore.Store[kanbanItem], audit *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
				other := etagstore.New[auditRecord](audit.Backend(), nil)
				return func(r *http.Request, key string, write func(*etagstore.Tx[kanbanItem]) error) error {
					runs := 0
					return etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error {
						if runs++; runs > 1 {
							_, err := cards.In(tx).Get(key) // reads the card, writes nothing
							return err
						}
						if err := write(cards.In(tx)); err != nil {
							return err
						}
						if _, err := audit.In(tx).Get("audit." + key); err != nil {
							return err
						}
						// Another writer changes what this run read: fn runs again.
						_, err := other.Update(context.Background(), "audit."+key, func(a *auditRecord) error { a.Last = "other"; return nil })
						return err
					})
				}
			}, "committed no document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			b := memstore.New(nil)
			cards := etagstore.New[kanbanItem](b, nil)
			audit := etagstore.New[auditRecord](b, nil)
			if _, err := audit.Create(ctx, "audit.card.1", auditRecord{}); err != nil {
				t.Fatal(err)
			}
			if tc.hdr["If-None-Match"] == "" {
				if _, err := cards.Create(ctx, "card.1", kanbanItem{Title: "a"}); err != nil {
					t.Fatal(err)
				}
			}
			var logs logBuffer
			h := etaghttp.Handler(cards, &etaghttp.HandlerOptions[kanbanItem]{Logger: logs.logger(), Transact: tc.hook(cards, audit)})
			resp, body := serve(h, tc.method, "/card.1", tc.body, tc.hdr)
			if p := problemOf(t, resp, body); resp.StatusCode != http.StatusInternalServerError || p.Detail != "storage error" {
				t.Errorf("%d %s, want 500 storage error", resp.StatusCode, body)
			}
			recs := logs.take(t)
			if len(recs) != 1 || recs[0]["level"] != "ERROR" || !strings.Contains(fmt.Sprint(recs[0]["err"]), tc.cause) {
				t.Errorf("logged %v, want one ERROR record naming %q", recs, tc.cause)
			}
			if d, err := cards.Get(ctx, "card.1"); err == nil && d.Value.Title == "b" {
				t.Errorf("the card holds the request's write: %+v", d.Value)
			}
		})
	}
}

// swallowing is a hook that runs write in a transaction it aborts with
// errSwallowed, and then returns nil.
func swallowing(errSwallowed error) transactHook {
	return func(cards *etagstore.Store[kanbanItem], _ *etagstore.Store[auditRecord]) func(*http.Request, string, func(*etagstore.Tx[kanbanItem]) error) error {
		return func(r *http.Request, _ string, write func(*etagstore.Tx[kanbanItem]) error) error {
			err := etagstore.Transact(r.Context(), func(tx *etagstore.Txn) error {
				if err := write(cards.In(tx)); err != nil {
					return err
				}
				return errSwallowed
			})
			if errors.Is(err, errSwallowed) {
				return nil
			}
			return err
		}
	}
}
