//go:build funccount

// The functions one uncontended Update passes through, counted from Go's
// coverage counters. Opt-in: it needs coverage profiles of several runs,
// so it runs only through scripts/update-funcs, never in plain go test.

package etagstore_test

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

var (
	funcsBackend  = flag.String("funcs.backend", "memstore", "TestUpdateFuncsRun: the backend, memstore or tablestore (Azurite)")
	funcsUpdate   = flag.String("funcs.update", "", "TestUpdateFuncsRun: the key to Update after the warm-up (none: the warm-up alone)")
	funcsProfiles = flag.String("funcs.profiles", "", "TestUpdateFuncs: the folder of the runs' coverage profiles")
	funcsOut      = flag.String("funcs.out", "", "TestUpdateFuncs: write the list of functions to this file")
)

const module = "github.com/etagstore/etagstore/"

// funcsKeys are the keys whose Updates are counted, each in a run of its
// own; funcsWarm names the run of the warm-up alone.
var funcsKeys = []string{"k1", "k2", "k3"}

const funcsWarm = "warm"

// TestUpdateFuncsRun is one run: the warm-up, as in real use (New, a
// Create and an Update of another key, and the Creates of the keys
// counted, so that their versions are in the version cache as after any
// write of this process), then one Update of the key -funcs.update, which
// no other caller touches.
func TestUpdateFuncsRun(t *testing.T) {
	var b driver.Backend
	switch *funcsBackend {
	case "memstore":
		b = memstore.New(nil)
	case "tablestore":
		b = tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "docs"})
	default:
		t.Fatalf("-funcs.backend=%q: memstore or tablestore", *funcsBackend)
	}
	ctx := t.Context()
	s := etagstore.New[counter](b, nil)
	for _, k := range append([]string{funcsWarm}, funcsKeys...) {
		if _, err := s.Create(ctx, k, counter{}); err != nil {
			t.Fatal(err)
		}
	}
	inc := func(c *counter) error { c.N++; return nil }
	if _, err := s.Update(ctx, funcsWarm, inc); err != nil {
		t.Fatal(err)
	}
	if *funcsUpdate == "" {
		return
	}
	if d, err := s.Update(ctx, *funcsUpdate, inc); err != nil || d.Value.N != 1 {
		t.Fatalf("Update(%q) = %+v, %v; want N 1", *funcsUpdate, d.Value, err)
	}
}

// TestUpdateFuncs counts the distinct functions of this module (methods
// and closures each on its own) that one uncontended Update executes: the
// functions with a block whose count differs between the coverage profile
// of the warm-up alone and that of the warm-up and the Update
// (TestUpdateFuncsRun; -covermode=count). It compares the Updates of
// three keys, each run on its own, and fails unless they pass through
// the same functions.
func TestUpdateFuncs(t *testing.T) {
	if *funcsProfiles == "" {
		t.Fatal("-funcs.profiles is not set: run through scripts/update-funcs")
	}
	warm := profile(t, filepath.Join(*funcsProfiles, funcsWarm))
	var lists [][]fn
	for _, k := range funcsKeys {
		lists = append(lists, executed(t, warm, profile(t, filepath.Join(*funcsProfiles, k))))
	}
	for i := 1; i < len(lists); i++ {
		if !slices.Equal(lists[0], lists[i]) {
			t.Fatalf("the Updates of %s and %s passed through different functions:\n%s\n----\n%s", funcsKeys[0], funcsKeys[i], report(lists[0]), report(lists[i]))
		}
	}
	out := report(lists[0])
	t.Logf("one uncontended Update:\n%s", out)
	if *funcsOut != "" {
		if err := os.WriteFile(*funcsOut, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// profile reads a coverage profile: the count of each block, by its
// place (file:from,to statements).
func profile(t *testing.T, name string) map[string]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blocks := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 {
			blocks[fields[0]+" "+fields[1]] = fields[2]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// fn is a function of the module: its file (module-relative) and name.
type fn struct{ file, name string }

// group is where fn is counted: the root package, internal/engine, the
// other internal packages, or the rest (backends, driver).
func (f fn) group() string {
	switch dir := filepath.Dir(f.file); {
	case dir == ".":
		return "root"
	case dir == "internal/engine":
		return "internal/engine"
	case strings.HasPrefix(dir, "internal/"):
		return "other internal"
	}
	return "backends and driver"
}

// report lists fns grouped and counted, by file.
func report(fns []fn) string {
	var sb strings.Builder
	groups := []string{"root", "internal/engine", "other internal", "backends and driver"}
	n := map[string]int{}
	for _, f := range fns {
		n[f.group()]++
	}
	fmt.Fprintf(&sb, "root %d, internal/engine %d (together %d); other internal %d; backends and driver %d\n",
		n["root"], n["internal/engine"], n["root"]+n["internal/engine"], n["other internal"], n["backends and driver"])
	for _, g := range groups {
		fmt.Fprintf(&sb, "\n%s: %d\n", g, n[g])
		file := ""
		for _, f := range fns {
			if f.group() != g {
				continue
			}
			if f.file != file {
				file = f.file
				fmt.Fprintf(&sb, "  %s\n", file)
			}
			fmt.Fprintf(&sb, "    %s\n", f.name)
		}
	}
	return sb.String()
}

// executed returns the functions of the module with a block whose count
// differs between the profiles before and after, sorted by group, file
// and name.
func executed(t *testing.T, before, after map[string]string) []fn {
	t.Helper()
	funcs := map[string][]span{} // per file, its functions
	seen := map[fn]bool{}
	for block, n := range after {
		if before[block] == n {
			continue
		}
		// module/dir/name.go:line.column,line.column statements
		file, pos, _ := strings.Cut(block, ":")
		file = strings.TrimPrefix(file, module)
		l, rest, _ := strings.Cut(pos, ".")
		c, _, _ := strings.Cut(rest, ",")
		line, _ := strconv.Atoi(l)
		col, _ := strconv.Atoi(c)
		if _, ok := funcs[file]; !ok {
			funcs[file] = funcsOf(t, file)
		}
		name, ok := innermost(funcs[file], line, col)
		if !ok {
			t.Fatalf("%s: no function holds the block at %d.%d", file, line, col)
		}
		seen[fn{file, name}] = true
	}
	groupOrder := map[string]int{"root": 0, "internal/engine": 1, "other internal": 2, "backends and driver": 3}
	var fns []fn
	for f := range seen {
		fns = append(fns, f)
	}
	slices.SortFunc(fns, func(a, b fn) int {
		return cmp.Or(cmp.Compare(groupOrder[a.group()], groupOrder[b.group()]), cmp.Compare(a.file, b.file), cmp.Compare(a.name, b.name))
	})
	return fns
}

// span is a function's body, from its opening to its closing brace, and
// its name: Recv.Method or Func for a declaration, with .funcN (.funcN.M
// when nested) for its closures, as the compiler names them.
type span struct {
	name     string
	from, to gotoken.Position
}

func funcsOf(t *testing.T, file string) []span {
	t.Helper()
	fset := gotoken.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var spans []span
	var lits func(n ast.Node, outer string, sep string)
	lits = func(n ast.Node, outer, sep string) {
		i := 0
		ast.Inspect(n, func(m ast.Node) bool {
			lit, ok := m.(*ast.FuncLit)
			if !ok || m == n {
				return true
			}
			i++
			name := outer + sep + strconv.Itoa(i)
			spans = append(spans, span{name, fset.Position(lit.Body.Lbrace), fset.Position(lit.Body.Rbrace)})
			lits(lit, name, ".")
			return false
		})
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			lits(d, "glob", "..func")
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		if fd.Body == nil {
			continue
		}
		spans = append(spans, span{name, fset.Position(fd.Body.Lbrace), fset.Position(fd.Body.Rbrace)})
		lits(fd.Body, name, ".func")
	}
	return spans
}

// recvName is the type of a receiver, without its type parameters.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "(*" + recvName(e.X) + ")"
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}

// innermost is the name of the narrowest span holding line.col.
func innermost(spans []span, line, col int) (string, bool) {
	best, found := span{}, false
	for _, s := range spans {
		if before(line, col, s.from) || after(line, col, s.to) {
			continue
		}
		if !found || !before(s.from.Line, s.from.Column, best.from) {
			best, found = s, true
		}
	}
	return best.name, found
}

func before(line, col int, p gotoken.Position) bool {
	return line < p.Line || line == p.Line && col < p.Column
}

func after(line, col int, p gotoken.Position) bool {
	return line > p.Line || line == p.Line && col > p.Column
}
