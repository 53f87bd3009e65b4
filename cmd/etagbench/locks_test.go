package main

import (
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/internal/smoke"
)

// The locks scenario, short: both scenarios (one process, and worker
// processes), both modes, each cell ending with every hold checked
// against every other for overlap (the run fails on one).
func TestLocksSmoke(t *testing.T) {
	azuritetest.ConnectionString(t) // fails in CI, never skips, without Azurite
	bin := smoke.Build(t)
	out, errOut := run(t, 2*time.Minute, bin, "-backends", "blob", "-only", "locks", "-d", "300ms")
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| locks,") {
			continue
		}
		rows++
		if !strings.Contains(line, "| none (") {
			t.Errorf("a cell without its overlap check: %s", line)
		}
	}
	// 1 process × 16 and 4 processes × 4, lease and locker.
	if rows != 4 {
		t.Errorf("%d locks rows, want 4", rows)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
}
