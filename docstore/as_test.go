package docstore

import (
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"gocloud.dev/docstore"

	"github.com/etagstore/etagstore/blobstore"
	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// asTest checks, inside drivertest's As case, that Collection.As reaches
// the backend and ErrorAs the SDK's *azcore.ResponseError (Azure backends:
// the suite's error is a Create of an existing document, 409).
type asTest struct {
	backend func(c *docstore.Collection) bool
	azure   bool
}

func (a asTest) Name() string { return "backend and ResponseError" }

func (a asTest) CollectionCheck(c *docstore.Collection) error {
	var b edriver.Backend
	if !c.As(&b) || b == nil {
		return errors.New("As(*driver.Backend) = false")
	}
	if !a.backend(c) {
		return fmt.Errorf("As of the backend's own type = false (backend %T)", b)
	}
	return nil
}

func (asTest) QueryCheck(it *docstore.DocumentIterator) error { return nil }

func (a asTest) ErrorCheck(c *docstore.Collection, err error) error {
	var re *azcore.ResponseError
	if got := c.ErrorAs(err, &re); got != a.azure {
		return fmt.Errorf("ErrorAs(*azcore.ResponseError) = %v for %v", got, err)
	}
	if a.azure && re.StatusCode != 409 {
		return fmt.Errorf("ResponseError status %d, want 409", re.StatusCode)
	}
	return nil
}

var (
	asMemory = asTest{backend: func(c *docstore.Collection) bool { var b *memstore.Backend; return c.As(&b) }}
	asTable  = asTest{backend: func(c *docstore.Collection) bool { var b *tablestore.Backend; return c.As(&b) }, azure: true}
	asBlob   = asTest{backend: func(c *docstore.Collection) bool { var b *blobstore.Backend; return c.As(&b) }, azure: true}
)
