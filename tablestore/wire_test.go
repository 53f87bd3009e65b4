package tablestore_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/google/go-cmp/cmp"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// sent is one request as it went on the wire.
type sent struct {
	method string
	header http.Header
	length int64 // Content-Length; -1 when chunked
	body   []byte
}

// recorder is a pipeline policy (run per try, just before the transport)
// keeping the requests sent.
type recorder struct {
	mu   sync.Mutex
	reqs []sent
}

func (r *recorder) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	s := sent{method: raw.Method, header: raw.Header.Clone(), length: raw.ContentLength}
	if body := req.Body(); body != nil {
		s.body, _ = io.ReadAll(body)
		if err := req.RewindBody(); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, s)
	r.mu.Unlock()
	return req.Next()
}

// take returns the requests kept since the last take.
func (r *recorder) take() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs := r.reqs
	r.reqs = nil
	return reqs
}

// TestUpdateSendsWhatChanged: an Update without the version cache sends
// what a hand-written raw SDK loop sends (a GET, then a write with
// If-Match, the same headers, the body with a Content-Length, never
// chunked), except that its write is a Merge Entity of the one property
// the mutation changed: the 10,000-character Body, which it did not
// change, is not sent again. The property it sends is byte for byte the
// raw loop's.
func TestUpdateSendsWhatChanged(t *testing.T) {
	rec := &recorder{}
	client := recordedTable(t, rec)
	ctx := t.Context()
	body := strings.Repeat("0123456789abcdef é€😀<>&\u2028\"\\\n", 300)

	s := tablestore.NewStore[page](client, &tablestore.Options{Partition: "p"}, &etagstore.Options{CacheSize: -1})
	if _, err := s.Upsert(ctx, "lib", page{Title: "bench", Body: body}); err != nil {
		t.Fatal(err)
	}
	first, _ := json.Marshal(map[string]any{"PartitionKey": "p", "RowKey": "raw", "Title": "bench", "Body": body, "N": 0})
	if _, err := client.UpsertEntity(ctx, first, nil); err != nil {
		t.Fatal(err)
	}
	rec.take()
	if _, err := s.Update(ctx, "lib", func(p *page) error { p.N++; return nil }); err != nil {
		t.Fatal(err)
	}
	lib := rec.take()
	if err := rawUpdate(client, "p", "raw").update(ctx); err != nil {
		t.Fatal(err)
	}
	raw := rec.take()

	if got, want := methods(lib), methods(raw); !slices.Equal(got, []string{"GET", "PATCH"}) || !slices.Equal(want, []string{"GET", "PUT"}) {
		t.Fatalf("library sent %v, raw %v; want GET, PATCH (Merge Entity) and GET, PUT", got, want)
	}
	for i := range raw {
		if diff := cmp.Diff(headerNames(raw[i].header), headerNames(lib[i].header)); diff != "" {
			t.Errorf("%s headers (-raw +library):\n%s", raw[i].method, diff)
		}
		for _, r := range []sent{raw[i], lib[i]} {
			if r.length != int64(len(r.body)) {
				t.Errorf("%s: Content-Length %d for a body of %d bytes", r.method, r.length, len(r.body))
			}
		}
	}
	if lib[1].header.Get("If-Match") == "" {
		t.Errorf("the library's merge has no If-Match")
	}
	libProps, rawProps := members(t, lib[1].body), members(t, raw[1].body)
	for _, name := range []string{"N", "PartitionKey"} {
		if string(libProps[name]) != string(rawProps[name]) {
			t.Errorf("property %s: library sent %.80s, raw %.80s", name, libProps[name], rawProps[name])
		}
	}
	if got, want := slices.Sorted(maps.Keys(libProps)), []string{"N", "PartitionKey", "RowKey", tablestore.MetaProperty}; !slices.Equal(got, want) {
		t.Errorf("library's merge has properties %v, want %v", got, want)
	}
	if len(lib[1].body) > 300 {
		t.Errorf("library's merge is %d bytes: %s", len(lib[1].body), lib[1].body)
	}
	if got, want := slices.Sorted(maps.Keys(rawProps)), []string{"Body", "N", "PartitionKey", "RowKey", "Timestamp", "Title", "odata.etag", "odata.metadata"}; !slices.Equal(got, want) {
		t.Errorf("raw's PUT has properties %v, want %v", got, want)
	}
}

// recordedTable creates a fresh table and returns a client for it whose
// requests rec keeps.
func recordedTable(t *testing.T, rec *recorder) *aztables.Client {
	t.Helper()
	name := azuritetest.Name("wire")
	svc, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(t), &aztables.ClientOptions{ClientOptions: azuritetest.Options})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateTable(t.Context(), name, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.DeleteTable(t.Context(), name, nil) })
	opts := azuritetest.Options
	opts.PerRetryPolicies = []policy.Policy{rec}
	recorded, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(t), &aztables.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return recorded.NewClient(name)
}

func methods(reqs []sent) []string {
	var m []string
	for _, r := range reqs {
		m = append(m, r.method)
	}
	return m
}

// headerNames are the names of h, with the values of those that do not
// change from request to request.
func headerNames(h http.Header) map[string]string {
	names := map[string]string{}
	for k, v := range h {
		switch k {
		case "If-Match", "Content-Length", "Authorization", "X-Ms-Date", "X-Ms-Client-Request-Id", "Traceparent":
			names[k] = "…"
		default:
			names[k] = strings.Join(v, ",")
		}
	}
	return names
}

// members are the members of the JSON object body, raw.
func members(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %.200s: %v", body, err)
	}
	return m
}
