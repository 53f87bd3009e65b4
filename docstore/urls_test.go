package docstore

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"gocloud.dev/docstore"

	"github.com/etagstore/etagstore/internal/azuritetest"
)

type page struct {
	Name             string `docstore:"name"`
	Text             string
	DocstoreRevision any
}

// roundTrip writes and reads a document through a collection opened by URL.
func roundTrip(t *testing.T, url string) {
	t.Helper()
	ctx := t.Context()
	coll, err := docstore.OpenCollection(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	if err := coll.Put(ctx, &page{Name: "home", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	got := &page{Name: "home"}
	if err := coll.Get(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got.Text != "hello" || got.DocstoreRevision == nil {
		t.Errorf("got %+v", got)
	}
}

func TestURLMemory(t *testing.T) {
	roundTrip(t, "etagmem://pages?key=name")
	// The same name is the same backend.
	coll, err := docstore.OpenCollection(t.Context(), "etagmem://pages")
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	if err := coll.Get(t.Context(), &page{Name: "home"}); err != nil {
		t.Errorf("second open: %v", err)
	}
	_, err = docstore.OpenCollection(t.Context(), "etagmem://pages?nonsense=1")
	if err == nil || !strings.Contains(err.Error(), `unknown query parameter "nonsense"`) {
		t.Errorf("unknown parameter: %v", err)
	}
}

// Credentials as the Go CDK's azureblob opener takes them: here a
// connection string in AZURE_STORAGE_CONNECTION_STRING, and an account
// name and key in AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY with the
// emulator's address in AZURE_STORAGE_DOMAIN.
func TestURLAzure(t *testing.T) {
	cs := azuritetest.ConnectionString(t)
	table := azuritetest.Name("u")
	svc, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateTable(context.Background(), table, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), table, nil) })
	c := azuritetest.NewContainer(t)
	container := c.URL()[strings.LastIndex(c.URL(), "/")+1:]

	t.Run("connection string", func(t *testing.T) {
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", cs)
		roundTrip(t, "azuretable://"+table+"?partition=cs")
		roundTrip(t, "azureblob://"+container+"?prefix=cs/")
	})
	t.Run("shared key", func(t *testing.T) {
		var account, key string
		for _, part := range strings.Split(cs, ";") {
			if v, ok := strings.CutPrefix(part, "AccountName="); ok {
				account = v
			}
			if v, ok := strings.CutPrefix(part, "AccountKey="); ok {
				key = v
			}
		}
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
		t.Setenv("AZURE_STORAGE_ACCOUNT", account)
		t.Setenv("AZURE_STORAGE_KEY", key)
		t.Setenv("AZURE_STORAGE_PROTOCOL", "http")
		t.Setenv("AZURE_STORAGE_DOMAIN", strings.TrimPrefix(azuritetest.Host(t, "Table"), "http://"))
		roundTrip(t, "azuretable://"+table+"?partition=key")
		t.Setenv("AZURE_STORAGE_DOMAIN", strings.TrimPrefix(azuritetest.Host(t, "Blob"), "http://"))
		roundTrip(t, "azureblob://"+container+"?prefix=key/")
	})
}
