package azerr

import (
	"errors"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/etagstore/etagstore/driver"
)

func TestServiceErrorOneLine(t *testing.T) {
	resp := &http.Response{StatusCode: 404, Header: http.Header{"X-Ms-Request-Id": {"709f47ea"}}}
	re := &azcore.ResponseError{StatusCode: 404, ErrorCode: "ResourceNotFound", RawResponse: resp}
	err := Wrap(driver.ErrNotFound, New("tablestore", "read", "backlog.nope", re, re))
	if got, want := err.Error(), `etagstore: not found: tablestore: read "backlog.nope" (404 ResourceNotFound, request 709f47ea)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var back *azcore.ResponseError
	if !errors.Is(err, driver.ErrNotFound) || !errors.As(err, &back) || back != re {
		t.Errorf("%v: want ErrNotFound and the SDK's error", err)
	}
	se := &ServiceError{Backend: "tablestore", Op: "batch", Status: 409, Code: "EntityAlreadyExists", Detail: "The specified\nentity already exists.", Err: re}
	if got, want := se.Error(), `tablestore: batch: The specified; entity already exists. (409 EntityAlreadyExists)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	busy := ServerBusy(503, "ServerBusy", &ServiceError{Backend: "blobstore", Op: "write", Key: "k", Status: 503, Code: "ServerBusy", Err: re})
	if got, want := busy.Error(), `etagstore: unavailable: the service refused the request without applying it (throttled): blobstore: write "k" (503 ServerBusy)`; got != want || !errors.Is(busy, driver.ErrNotApplied) || driver.SentinelOf(busy) != driver.ErrUnavailable {
		t.Errorf("Error() = %q, want %q matching ErrNotApplied and ErrUnavailable", got, want)
	}
	if got, want := Plain("blobstore", "list", "", errors.New("dial tcp: refused\nretrying")).Error(), "blobstore: list: dial tcp: refused; retrying"; got != want {
		t.Errorf("Plain = %q, want %q", got, want)
	}
}
