package tablestore_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/etagstore/etagstore/etaghttp"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// etaghttp over tables: an If-Match holding a token this server never
// issued (any base64url text becomes a storage ETag) is simply not current:
// 412, as on memstore and blobs, never a 500.
func TestHTTPForeignETagOnTables(t *testing.T) {
	s := tablestore.NewStore[Task](azuritetest.NewTable(t), &tablestore.Options{Partition: "p"}, nil)
	if _, err := s.Create(t.Context(), "k", Task{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(etaghttp.Handler(s, nil))
	defer srv.Close()
	for _, method := range []string{"PUT", "DELETE"} {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/k", strings.NewReader(`{"Title":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("If-Match", `"Z2FyYmFnZQ"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusPreconditionFailed {
			t.Errorf("%s with a foreign If-Match: %d, want 412", method, resp.StatusCode)
		}
	}
}
