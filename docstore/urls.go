package docstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/docstore"

	"github.com/etagstore/etagstore/blobstore"
	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// The URL schemes the package registers on docstore.DefaultURLMux.
const (
	TableScheme  = "azuretable" // azuretable://TABLE?key=name&partition=P
	BlobScheme   = "azureblob"  // azureblob://CONTAINER?key=name&prefix=docs/
	MemoryScheme = "etagmem"    // etagmem://NAME?key=name
)

func init() {
	mux := docstore.DefaultURLMux()
	mux.RegisterCollection(TableScheme, &URLOpener{})
	mux.RegisterCollection(BlobScheme, &URLOpener{})
	mux.RegisterCollection(MemoryScheme, &URLOpener{})
}

// URLOpener opens collections by URL. The host names the table, the
// container, or (etagmem) an in-memory backend shared by every URL of that
// name in the process. Query parameters:
//
//   - key: the key field (default "name"); revision_field and
//     partition_field: Options.RevisionField and Options.PartitionField;
//     create=true: Options.Create.
//   - azuretable: partition, a fixed PartitionKey for every document
//     (tablestore.Options.Partition); without it keys are
//     "PartitionKey/RowKey" (give partition_field).
//   - azureblob: prefix, put before every blob name (blobstore.Options.Prefix).
//   - azuretable, azureblob: domain, protocol, localemu and
//     storage_account, as gocloud.dev/blob/azureblob takes them.
//
// Credentials come from the environment as gocloud.dev/blob/azureblob's
// opener takes them: AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY (shared
// key), else AZURE_STORAGE_SAS_TOKEN, else
// AZURE_STORAGE_CONNECTION_STRING, else azidentity's default credential;
// AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL and
// AZURE_STORAGE_IS_LOCAL_EMULATOR shape the service URL. The table or
// container must exist, unless create=true (Options.Create) creates it.
type URLOpener struct {
	// Options are the collection's options; the URL's parameters override
	// RevisionField and PartitionField.
	Options Options
}

var (
	memMu       sync.Mutex
	memBackends = map[string]*memstore.Backend{}
)

// OpenCollectionURL opens the collection u names.
func (o *URLOpener) OpenCollectionURL(_ context.Context, u *url.URL) (*docstore.Collection, error) {
	q := u.Query()
	opts := o.Options
	key := take(q, "key", "name")
	opts.RevisionField = take(q, "revision_field", opts.RevisionField)
	opts.PartitionField = take(q, "partition_field", opts.PartitionField)
	switch create := take(q, "create", ""); create {
	case "true":
		opts.Create = true
	case "", "false":
	default:
		return nil, invalidf("open %s: create=%q: give true or false", u.Redacted(), create)
	}
	var b edriver.Backend
	var err error
	switch u.Scheme {
	case TableScheme:
		b, err = openTable(u.Host, q)
	case BlobScheme:
		b, err = openBlob(u.Host, q)
	case MemoryScheme:
		b, err = openMemory(u.Host, q)
	default:
		err = invalidf("unknown scheme %q", u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", u.Redacted(), err)
	}
	return OpenCollection(b, key, &opts)
}

// take removes parameter name from q and returns its value, or def.
func take(q url.Values, name, def string) string {
	if !q.Has(name) {
		return def
	}
	v := q.Get(name)
	q.Del(name)
	return v
}

func openMemory(name string, q url.Values) (edriver.Backend, error) {
	if err := noneLeft(q); err != nil {
		return nil, err
	}
	memMu.Lock()
	defer memMu.Unlock()
	b, ok := memBackends[name]
	if !ok {
		b = memstore.New(nil)
		memBackends[name] = b
	}
	return b, nil
}

func openBlob(name string, q url.Values) (edriver.Backend, error) {
	prefix := take(q, "prefix", "")
	so, err := serviceOptions(q)
	if err != nil {
		return nil, err
	}
	svc, err := azureblob.NewServiceURL(so)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	c, err := azureblob.NewDefaultClient(svc, azureblob.ContainerName(name))
	if err != nil {
		return nil, err
	}
	return blobstore.New(c, &blobstore.Options{Prefix: prefix}), nil
}

func openTable(name string, q url.Values) (edriver.Backend, error) {
	partition := take(q, "partition", "")
	so, err := serviceOptions(q)
	if err != nil {
		return nil, err
	}
	if so.StorageDomain == "" {
		so.StorageDomain = "table.core.windows.net"
	}
	c, err := tableClient(so, name)
	if err != nil {
		return nil, err
	}
	return tablestore.New(c, &tablestore.Options{Partition: partition}), nil
}

// serviceOptions is azureblob's service URL options from the environment,
// with the URL's overrides.
func serviceOptions(q url.Values) (*azureblob.ServiceURLOptions, error) {
	so := azureblob.NewDefaultServiceURLOptions()
	so.StorageDomain = take(q, "domain", so.StorageDomain)
	so.Protocol = take(q, "protocol", so.Protocol)
	so.AccountName = take(q, "storage_account", so.AccountName)
	if q.Has("localemu") {
		so.IsLocalEmulator = take(q, "localemu", "") == "true"
	}
	return so, noneLeft(q)
}

func noneLeft(q url.Values) error {
	for name := range q {
		return invalidf("unknown query parameter %q", name)
	}
	return nil
}

// tableClient makes a table client with credentials taken as azureblob's
// opener takes them.
func tableClient(so *azureblob.ServiceURLOptions, table string) (*aztables.Client, error) {
	account, key := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_KEY")
	sas := os.Getenv("AZURE_STORAGE_SAS_TOKEN")
	cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	if account == "" {
		account = so.AccountName
	}
	svc, err := azureblob.NewServiceURL(&azureblob.ServiceURLOptions{AccountName: account, StorageDomain: so.StorageDomain, Protocol: so.Protocol, IsLocalEmulator: so.IsLocalEmulator})
	if err != nil && cs == "" {
		return nil, invalidf("%v", err)
	}
	tableURL := strings.TrimSuffix(string(svc), "/") + "/" + table
	switch {
	case account != "" && key != "":
		cred, err := aztables.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, err
		}
		return aztables.NewClientWithSharedKey(tableURL, cred, nil)
	case sas != "":
		return aztables.NewClientWithNoCredential(tableURL+"?"+strings.TrimPrefix(sas, "?"), nil)
	case cs != "":
		s, err := aztables.NewServiceClientFromConnectionString(cs, nil)
		if err != nil {
			return nil, err
		}
		return s.NewClient(table), nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, err
	}
	return aztables.NewClient(tableURL, cred, nil)
}
