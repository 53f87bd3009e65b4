package blobstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

// checkOneLine fails unless err prints as one readable line (see
// azuritetest.CheckOneLine).
func checkOneLine(t *testing.T, what string, err error) {
	t.Helper()
	azuritetest.CheckOneLine(t, what, err, "blobstore:")
}

func TestErrorTextMissingBlob(t *testing.T) {
	s, _ := newNotes(t)
	_, err := s.Get(t.Context(), "notes/nope")
	checkOneLine(t, "Get missing", err)
	if !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("Get missing = %v, want ErrNotFound", err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 404 {
		t.Errorf("Get missing = %v, want a 404 *azcore.ResponseError one errors.As away", err)
	}
	if !strings.Contains(err.Error(), `"notes/nope"`) || !strings.Contains(err.Error(), "404") {
		t.Errorf("Get missing = %q, want the key and the status", err)
	}
}

func TestErrorTextMissingContainer(t *testing.T) {
	s := etagstore.New[Note](blobstore.New(azuritetest.MissingContainer(t), nil), nil)
	_, err := s.Get(t.Context(), "k")
	checkOneLine(t, "Get from a missing container", err)
	if !errors.Is(err, etagstore.ErrStorageNotFound) || errors.Is(err, etagstore.ErrNotFound) || !strings.Contains(err.Error(), "container does not exist") {
		t.Errorf("Get from a missing container = %v, want ErrStorageNotFound (not ErrNotFound) saying the container does not exist", err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Errorf("Get from a missing container = %v, want a *azcore.ResponseError one errors.As away", err)
	}
}

func TestErrorTextStaleReplace(t *testing.T) {
	s, _ := newNotes(t)
	d, err := s.Create(t.Context(), "k", Note{Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Upsert(t.Context(), "k", Note{Text: "b"}); err != nil {
		t.Fatal(err)
	}
	d.Value.Text = "c"
	_, err = s.Replace(t.Context(), d)
	if !errors.Is(err, etagstore.ErrConflict) {
		t.Fatalf("stale Replace = %v, want ErrConflict", err)
	}
	t.Logf("stale Replace: %s", err)
}

// A listing prefix no blob name can hold is refused before sending, with
// ErrInvalidKey naming the prefix, not answered with the service's 400.
func TestListPrefixNoBlobNameHolds(t *testing.T) {
	s, _ := newNotes(t)
	if _, err := s.Create(t.Context(), "k", Note{Text: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"k\uFFFF", "\uFFFE", "k\uE000", "k\U0010FFFF"} {
		n := 0
		var lerr error
		for _, err := range s.List(t.Context(), prefix) {
			n++
			lerr = err
		}
		if n != 1 || !errors.Is(lerr, etagstore.ErrInvalidKey) || !strings.Contains(lerr.Error(), "prefix") {
			t.Errorf("List(%+q): %d results, error %v; want one ErrInvalidKey naming the prefix", prefix, n, lerr)
			continue
		}
		checkOneLine(t, "List", lerr)
		var re *azcore.ResponseError
		if errors.As(lerr, &re) {
			t.Errorf("List(%+q) = %v: sent to the service", prefix, lerr)
		}
		_, err := s.Page(t.Context(), prefix, 10, "")
		if !errors.Is(err, etagstore.ErrInvalidKey) || errors.As(err, &re) {
			t.Errorf("Page(%+q) = %v, want ErrInvalidKey before sending", prefix, err)
		}
	}
}
