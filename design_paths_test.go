package etagstore_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDesignNamesFilesThatExist: every Go file docs/design.md names
// (`write.go`, `retry/retry.go`, `internal/engine/send.go`) exists: from
// the module's root, from internal/, or, named bare, somewhere in the
// tree (a backend's `commit.go`, `tombstone.go`).
func TestDesignNamesFilesThatExist(t *testing.T) {
	doc, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	bare := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tools" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		bare[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`").FindAllStringSubmatch(string(doc), -1)
	if len(names) < 20 {
		t.Fatalf("found %d Go file names in docs/design.md; the pattern no longer reads it", len(names))
	}
	for _, m := range names {
		name := m[1]
		found := exists(name) || exists(filepath.Join("internal", name)) || !strings.Contains(name, "/") && bare[name]
		if !found {
			t.Errorf("docs/design.md names %s, which does not exist", name)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
