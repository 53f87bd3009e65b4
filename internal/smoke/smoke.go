// Package smoke runs the example programs as the README and docs/ show them, as
// subprocesses of their tests: a program that hangs, panics or exits non-zero
// fails its test with its output (and, when it hangs, every goroutine's
// stack) instead of stalling the test binary.
package smoke

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildTimeout bounds go build; a cold build cache compiles the Azure SDK.
const BuildTimeout = 5 * time.Minute

// Build compiles the main package in the test's working directory (go test
// runs a test in its package's directory) into t.TempDir() and returns the
// binary's path. It builds with -race when the test has the race detector.
func Build(t testing.TB) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH to build the example: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "example")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, append(args, ".")...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s .: %v (after %s)\n%s", strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), out)
	}
	t.Logf("built (race detector: %t) in %s", raceEnabled, time.Since(start).Round(time.Millisecond))
	return bin
}

// Command returns a command running bin with args that ends with ctx: the
// program then gets SIGQUIT, on which a Go program prints every goroutine's
// stack to stderr and exits, and is killed if it is still running 5 s later.
func Command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Run runs bin with args to its end and returns what it wrote to stdout and
// stderr. The test fails if the program is still running after timeout —
// with its output so far and its goroutines' stacks — or exits non-zero.
func Run(t testing.TB, timeout time.Duration, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := Command(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		t.Fatalf("%s did not end within %s: it hangs (deadlock?); stopped after %s (%v). Its stdout:\n%s\nIts stderr (goroutine stacks on SIGQUIT):\n%s",
			Name(args), timeout, took, err, Indent(out.String()), Indent(errOut.String()))
	case err != nil:
		t.Fatalf("%s failed after %s: %v. Its stdout:\n%s\nIts stderr:\n%s", Name(args), took, err, Indent(out.String()), Indent(errOut.String()))
	}
	t.Logf("%s ended after %s", Name(args), took)
	return out.String(), errOut.String()
}

// Name names the example (its directory) and its arguments for messages.
func Name(args []string) string {
	dir, _ := os.Getwd()
	return strings.Join(append([]string{"the example " + filepath.Base(dir)}, args...), " ")
}

// Indent formats a program's output for a failure message.
func Indent(s string) string {
	if s == "" {
		return "\t(nothing)"
	}
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// Buffer is an io.Writer safe to read while a running program writes to it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
