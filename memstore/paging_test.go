package memstore_test

import (
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/storetest"
)

func TestPaging(t *testing.T) {
	storetest.RunPaging(t, func(t *testing.T) etagstore.Backend { return memstore.New(nil) })
}
