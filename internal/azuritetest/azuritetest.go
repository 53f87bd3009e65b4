// Package azuritetest connects tests to the Azurite emulator started by
// scripts/test. A missing Azurite fails the test: it is never skipped.
package azuritetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
)

// EnvVar names the environment variable holding Azurite's connection string.
const EnvVar = "ETAGSTORE_AZURITE"

// ConnectionString returns Azurite's connection string or fails the test.
func ConnectionString(t testing.TB) string {
	t.Helper()
	cs := os.Getenv(EnvVar)
	if cs == "" {
		t.Fatalf("%s is not set: run the Azure tests through scripts/test, which starts Azurite", EnvVar)
	}
	return cs
}

// Name returns a fresh name usable for a table or a container.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// NewTable creates a fresh table and deletes it when the test ends.
func NewTable(t testing.TB) *aztables.Client {
	t.Helper()
	svc, name := createTable(t)
	return svc.NewClient(name)
}

func createTable(t testing.TB) (*aztables.ServiceClient, string) {
	t.Helper()
	svc, err := aztables.NewServiceClientFromConnectionString(ConnectionString(t), &aztables.ClientOptions{ClientOptions: Options})
	if err != nil {
		t.Fatal(err)
	}
	name := Name("t")
	if _, err := svc.CreateTable(context.Background(), name, nil); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := svc.DeleteTable(ctx, name, nil); err != nil {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	return svc, name
}

// NewContainer creates a fresh blob container and deletes it when the test
// ends.
func NewContainer(t testing.TB) *container.Client {
	t.Helper()
	svc, err := azblob.NewClientFromConnectionString(ConnectionString(t), &azblob.ClientOptions{ClientOptions: Options})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(Name("c"))
	c := svc.ServiceClient().NewContainerClient(name)
	if _, err := c.Create(context.Background(), nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Delete(ctx, nil); err != nil {
			t.Errorf("delete container %s: %v", name, err)
		}
	})
	return c
}

// NewQueue creates a fresh queue of Azurite's queue service and deletes it
// when the test ends.
func NewQueue(t testing.TB) *azqueue.QueueClient {
	t.Helper()
	svc, err := azqueue.NewServiceClientFromConnectionString(ConnectionString(t), &azqueue.ClientOptions{ClientOptions: Options})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(Name("q"))
	q := svc.NewQueueClient(name)
	if _, err := q.Create(context.Background(), nil); err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := q.Delete(ctx, nil); err != nil {
			t.Errorf("delete queue %s: %v", name, err)
		}
	})
	return q
}

// NewQueueVia creates a fresh queue and returns a client for it whose
// requests go to via (a fault proxy in front of Azurite's queue
// endpoint, say) instead of Azurite itself, with FastRetries.
func NewQueueVia(t testing.TB, via string) *azqueue.QueueClient {
	t.Helper()
	return NewQueueWith(t, via, FastRetries)
}

// NewQueueWith is NewQueueVia with the SDK client options opts.
func NewQueueWith(t testing.TB, via string, opts azcore.ClientOptions) *azqueue.QueueClient {
	t.Helper()
	direct := NewQueue(t)
	name := direct.URL()[strings.LastIndex(direct.URL(), "/")+1:]
	acct, key := accountKey(t)
	cred, err := azqueue.NewSharedKeyCredential(acct, key)
	if err != nil {
		t.Fatal(err)
	}
	q, err := azqueue.NewQueueClientWithSharedKeyCredential(strings.TrimRight(via, "/")+"/"+acct+"/"+name, cred, &azqueue.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// MissingQueue returns a client for a queue that does not exist.
func MissingQueue(t testing.TB) *azqueue.QueueClient {
	t.Helper()
	svc, err := azqueue.NewServiceClientFromConnectionString(ConnectionString(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc.NewQueueClient(strings.ToLower(Name("missing")))
}

// Host returns the scheme and host of service ("Blob", "Queue" or "Table")
// in Azurite's connection string, e.g. http://127.0.0.1:10002.
func Host(t testing.TB, service string) string {
	t.Helper()
	for _, part := range strings.Split(ConnectionString(t), ";") {
		if v, ok := strings.CutPrefix(part, service+"Endpoint="); ok {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatal(err)
			}
			return u.Scheme + "://" + u.Host
		}
	}
	t.Fatalf("%s has no %sEndpoint", EnvVar, service)
	return ""
}

// AccountKey returns the shared key credential of Azurite's account.
func accountKey(t testing.TB) (name, key string) {
	t.Helper()
	for _, part := range strings.Split(ConnectionString(t), ";") {
		if v, ok := strings.CutPrefix(part, "AccountName="); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(part, "AccountKey="); ok {
			key = v
		}
	}
	return name, key
}

// FastRetries are SDK client options for tests: short retry delays.
var FastRetries = azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: 4, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond, TryTimeout: 5 * time.Second}, Transport: Transport}

// Transport is the HTTP client of every test client of Azurite. Azurite
// is a Node.js server, which closes a connection idle for 5 s; the SDK's
// default transport keeps idle connections for 90 s, and a write sent on
// a connection the server is closing at that moment fails with a reset
// that no one can retry safely (its outcome is unknown). Idle connections
// are dropped after 3 s here. Azure's own endpoints keep connections far
// longer.
var Transport = &http.Client{Transport: &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     3 * time.Second,
	ForceAttemptHTTP2:   false,
}}

// Options are the SDK client options of test clients: Transport, and the
// SDK's default retries.
var Options = azcore.ClientOptions{Transport: Transport}

// NewTableVia creates a fresh table and returns a client for it whose
// requests go to via (for example a fault proxy in front of Azurite's table
// endpoint) instead of Azurite itself.
func NewTableVia(t testing.TB, via string) *aztables.Client {
	t.Helper()
	return NewTableWith(t, via, FastRetries)
}

// NewTableWith is NewTableVia with the SDK client options opts.
func NewTableWith(t testing.TB, via string, opts azcore.ClientOptions) *aztables.Client {
	t.Helper()
	_, name := createTable(t)
	acct, key := accountKey(t)
	cred, err := aztables.NewSharedKeyCredential(acct, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := aztables.NewClientWithSharedKey(strings.TrimRight(via, "/")+"/"+acct+"/"+name, cred, &aztables.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewContainerVia creates a fresh container and returns a client for it
// whose requests go to via instead of Azurite itself.
func NewContainerVia(t testing.TB, via string) *container.Client {
	t.Helper()
	direct := NewContainer(t)
	name := direct.URL()[strings.LastIndex(direct.URL(), "/")+1:]
	acct, key := accountKey(t)
	cred, err := azblob.NewSharedKeyCredential(acct, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(strings.TrimRight(via, "/")+"/"+acct+"/"+name, cred, &container.ClientOptions{ClientOptions: FastRetries})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// MissingTable returns a client for a table that does not exist.
func MissingTable(t testing.TB) *aztables.Client {
	t.Helper()
	svc, err := aztables.NewServiceClientFromConnectionString(ConnectionString(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc.NewClient(Name("missing"))
}

// MissingContainer returns a client for a blob container that does not
// exist.
func MissingContainer(t testing.TB) *container.Client {
	t.Helper()
	svc, err := azblob.NewClientFromConnectionString(ConnectionString(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc.ServiceClient().NewContainerClient(strings.ToLower(Name("missing")))
}

// CheckOneLine fails unless err prints as one readable line: no line
// break, no HTTP dump, the "etagstore:" prefix at most once, at most 300
// bytes, and starting with one of prefixes or "etagstore:".
func CheckOneLine(t testing.TB, what string, err error, prefixes ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	msg := err.Error()
	t.Logf("%s: %s", what, msg)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("%s: error has a line break: %q", what, msg)
	}
	if strings.Contains(msg, "RESPONSE") || strings.Contains(msg, "----") {
		t.Errorf("%s: error holds an HTTP dump: %q", what, msg)
	}
	if strings.Count(msg, "etagstore:") > 1 {
		t.Errorf("%s: repeated etagstore: prefix: %q", what, msg)
	}
	starts := strings.HasPrefix(msg, "etagstore:")
	for _, p := range prefixes {
		starts = starts || strings.HasPrefix(msg, p)
	}
	if !starts {
		t.Errorf("%s: error does not start with the backend's name: %q", what, msg)
	}
	if len(msg) > 300 {
		t.Errorf("%s: error is %d bytes long: %q", what, len(msg), msg)
	}
}
