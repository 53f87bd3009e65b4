// Command modproxy writes a module proxy, as a tree of files (GOPROXY
// file:///…), that serves the modules of this repository at one version,
// made from the checked-out commit: what the proxy would serve once the
// release is tagged (see RELEASING.md). scripts/consumer-check builds a
// module outside the workspace against it, to show that `go get` of the
// library and its docstore module at that version resolves.
//
//	go run ./cmd/modproxy -version v0.1.0 -out /tmp/proxy
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// modules are the modules meant for users: module path and directory in
// the repository.
var modules = []struct{ path, dir string }{
	{"github.com/etagstore/etagstore", ""},
	{"github.com/etagstore/etagstore/docstore", "docstore"},
}

func main() {
	version := flag.String("version", "", "the version to serve the modules at (v0.x.y)")
	out := flag.String("out", "", "the directory to write the proxy tree to")
	flag.Parse()
	if *version == "" || *out == "" {
		log.Fatal("usage: modproxy -version v0.x.y -out DIR")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		log.Fatalf("modproxy: not in a git work tree: %v", err)
	}
	repo := strings.TrimSpace(string(root))
	for _, m := range modules {
		if err := write(repo, *out, m.path, m.dir, *version); err != nil {
			log.Fatal(err)
		}
	}
}

// write puts module path at version, from directory dir of the commit
// checked out in repo, in the proxy tree out.
func write(repo, out, path, dir, version string) error {
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	var z bytes.Buffer
	if err := zip.CreateFromVCS(&z, mv, repo, "HEAD", dir); err != nil {
		return fmt.Errorf("modproxy: zip of %s: %w", path, err)
	}
	gomod, err := exec.Command("git", "-C", repo, "show", "HEAD:"+filepath.ToSlash(filepath.Join(dir, "go.mod"))).Output()
	if err != nil {
		return fmt.Errorf("modproxy: go.mod of %s: %w", path, err)
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  gomod,
		version + ".zip":  z.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s: %d bytes\n", path, version, z.Len())
	return nil
}
