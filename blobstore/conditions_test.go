package blobstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/blobstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
)

func TestGetIf(t *testing.T) {
	ctx := t.Context()
	s, _ := newNotes(t)
	d, err := s.Create(ctx, "n", Note{Text: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Hour)
	after := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		cond blobstore.ReadConditions
		want error
	}{
		{"If-None-Match current", blobstore.ReadConditions{IfNoneMatch: d.ETag}, blobstore.ErrNotModified},
		{"If-None-Match other", blobstore.ReadConditions{IfNoneMatch: `"0x1"`}, nil},
		{"If-Match current", blobstore.ReadConditions{IfMatch: d.ETag}, nil},
		{"If-Match other", blobstore.ReadConditions{IfMatch: `"0x1"`}, etagstore.ErrConflict},
		{"If-Modified-Since later", blobstore.ReadConditions{IfModifiedSince: after}, blobstore.ErrNotModified},
		{"If-Modified-Since earlier", blobstore.ReadConditions{IfModifiedSince: before}, nil},
		{"If-Unmodified-Since earlier", blobstore.ReadConditions{IfUnmodifiedSince: before}, etagstore.ErrConflict},
		{"If-Unmodified-Since later", blobstore.ReadConditions{IfUnmodifiedSince: after}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := blobstore.GetIf(ctx, s, "n", tc.cond)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("GetIf = %+v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if err != nil || got != d {
				t.Fatalf("GetIf = %+v, %v; want %+v", got, err, d)
			}
		})
	}
	if _, err := blobstore.GetIf(ctx, s, "missing", blobstore.ReadConditions{IfNoneMatch: d.ETag}); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("GetIf(missing) = %v, want ErrNotFound", err)
	}
}

func TestBlobNamesAndLimits(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	s := blobstore.NewStore[Note](c, &blobstore.Options{MaxDocSize: 1024}, nil)
	for _, bad := range []string{"ends.", "ends/", "a//b", "/lead", strings.Repeat("x", 1025), strings.Repeat("a/", 254) + "z", `back\slash`, "non\uFFFFchar", "non\uFFFEchar", "k\U0010FFFF", "k\uFDD0", "private\uE000use"} {
		if _, err := s.Create(ctx, bad, Note{}); !errors.Is(err, etagstore.ErrInvalidKey) {
			t.Errorf("Create(%.40q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	for _, good := range []string{"a/b/c.json", "ünïcode", strings.Repeat("x", 1024), "emoji😀", "k\uFFFD"} {
		if _, err := s.Create(ctx, good, Note{}); err != nil {
			t.Errorf("Create(%.40q) = %v", good, err)
		}
	}
	if _, err := s.Create(ctx, "big", Note{Text: strings.Repeat("x", 2000)}); !errors.Is(err, etagstore.ErrTooLarge) {
		t.Fatalf("Create over MaxDocSize = %v, want ErrTooLarge", err)
	}
	if _, err := s.Get(ctx, "big"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("refused document was written: %v", err)
	}
	props, err := c.NewBlobClient("a/b/c.json").GetProperties(ctx, nil)
	if err != nil || props.ContentType == nil || *props.ContentType != "application/json" {
		t.Fatalf("content type = %v, %v; want application/json", props.ContentType, err)
	}
}

// With the version cache on, Get revalidates its copy with If-None-Match:
// a 304 and no download while it is current, the new version once not.
func TestCachedGetRevalidates(t *testing.T) {
	ctx := t.Context()
	c := azuritetest.NewContainer(t)
	cached := blobstore.NewStore[Note](c, nil, &etagstore.Options{CacheSize: 8})
	other := blobstore.NewStore[Note](c, nil, nil)
	d, err := cached.Create(ctx, "n", Note{Text: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := cached.Get(ctx, "n")
		if err != nil || got != d {
			t.Fatalf("Get = %+v, %v; want %+v", got, err, d)
		}
	}
	if _, changed, err := blobstore.New(c, nil).Abilities().ReadIfChanged(ctx, "n", d.ETag); err != nil || changed {
		t.Fatalf("ReadIfChanged(current) = changed %v, %v", changed, err)
	}
	d2, err := other.Update(ctx, "n", func(n *Note) error { n.Text = "v2"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cached.Get(ctx, "n"); err != nil || got != d2 {
		t.Fatalf("Get after another writer = %+v, %v; want %+v", got, err, d2)
	}
	if err := other.Delete(ctx, "n", d2.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := cached.Get(ctx, "n"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Fatalf("Get after delete = %v, want ErrNotFound", err)
	}
}
