package docstore

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/gcerrors"

	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// recorder is a transport that keeps the URL of every request.
type recorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.Method+" "+req.URL.RawQuery)
	r.mu.Unlock()
	return azuritetest.Transport.Do(req)
}

// since returns the requests after the first n.
func (r *recorder) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.urls[n:]...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.urls)
}

// Queries and atomic writes cost what their plans say, counted at the
// transport: Limit 1 asks for 2 entities ($top: one, and one to tell
// whether more follow); a filter on the partition field is a PartitionKey
// filter; an atomic write of 5 Puts is one request, no read.
func TestQueriesCostWhatTheirPlansSay(t *testing.T) {
	ctx := t.Context()
	rec := &recorder{}
	opts := azuritetest.FastRetries
	opts.Transport = rec
	client := azuritetest.NewTableWith(t, azuritetest.Host(t, "Table"), opts)
	coll, err := OpenCollection(tablestore.New(client, nil), "name", &Options{PartitionField: "Customer"})
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	n := rec.count()
	acts := coll.Actions().AtomicWrites()
	for i := range 5 {
		acts.Put(&order{Name: fmt.Sprintf("o%d", i), Customer: "alice", Total: 1})
	}
	if err := acts.Do(ctx); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.since(n); len(reqs) != 1 || !strings.HasPrefix(reqs[0], "POST") {
		t.Errorf("an atomic write of 5 Puts sent %q, want one batch (no read)", reqs)
	}
	if err := coll.Put(ctx, &order{Name: "o9", Customer: "bob", Total: 1}); err != nil {
		t.Fatal(err)
	}

	q := coll.Query().Where("Customer", "=", "alice").Limit(1)
	plan, _ := q.Plan()
	n = rec.count()
	it := q.Get(ctx)
	got := 0
	for {
		var o order
		if err := it.Next(ctx, &o); err != nil {
			break
		}
		got++
	}
	it.Stop()
	reqs := rec.since(n)
	t.Logf("plan %s; requests %q", plan, reqs)
	if got != 1 || len(reqs) != 1 || !strings.Contains(reqs[0], "%24top=2") || !strings.Contains(reqs[0], "PartitionKey+eq+%27alice%27") {
		t.Errorf("Limit 1 on the partition field: %d documents from requests %q; want 1 from one request with $top=2 and a PartitionKey filter", got, reqs)
	}
	if !strings.Contains(plan, "PartitionKey eq 'alice'") || !strings.Contains(plan, "1 per page") {
		t.Errorf("plan %q does not say PartitionKey nor the page size", plan)
	}

	blobs, err := OpenCollection(blobstore.New(azuritetest.NewContainer(t), nil), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	if plan, _ := blobs.Query().Where("Customer", "=", "alice").Plan(); !strings.Contains(plan, "one GET each") {
		t.Errorf("blob plan %q does not say every document is read", plan)
	}
}

// A document no table entity can hold is refused before anything is
// sent, naming what is too large (ResourceExhausted, as the Store's
// ErrTooLarge); one whose members are only past one property is stored
// in parts and reads back whole: a 40,000-character string and a list of
// 3,000 items.
func TestLimitsBeforeSending(t *testing.T) {
	ctx := t.Context()
	rec := &recorder{}
	opts := azuritetest.FastRetries
	opts.Transport = rec
	coll, err := OpenCollection(tablestore.New(azuritetest.NewTableWith(t, azuritetest.Host(t, "Table"), opts), &tablestore.Options{Partition: "p"}), "name", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	many := map[string]any{"name": "many"}
	for i := range 300 {
		many[fmt.Sprintf("F%03d", i)] = int64(i)
	}
	n := rec.count()
	for _, doc := range []map[string]any{
		{"name": "huge", "Title": "t", "Notes": strings.Repeat("n", 600_000)},
		many,
	} {
		err := coll.Put(ctx, doc)
		if gcerrors.Code(err) != gcerrors.ResourceExhausted {
			t.Errorf("Put of %s = %v, want ResourceExhausted", doc["name"], err)
		}
		if doc["name"] == "huge" && (err == nil || !strings.Contains(err.Error(), "Notes")) {
			t.Errorf("the refusal %v does not name Notes", err)
		}
	}
	if sent := rec.since(n); len(sent) != 0 {
		t.Errorf("refused documents sent %q", sent)
	}
	items := make([]any, 3000)
	for i := range items {
		items[i] = map[string]any{"sku": fmt.Sprintf("sku-%04d", i), "qty": int64(i)}
	}
	big := map[string]any{"name": "big", "Note": strings.Repeat("é", 40_000), "Items": items}
	if err := coll.Put(ctx, big); err != nil {
		t.Fatal(err)
	}
	back := map[string]any{"name": "big"}
	if err := coll.Get(ctx, back); err != nil {
		t.Fatal(err)
	}
	delete(back, "DocstoreRevision")
	if diff := cmp.Diff(big, back); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}
