package azuritetest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWithAzuriteRunsWhereCalled: scripts/with-azurite starts Azurite and
// runs its command in the directory it was called from (another module's
// folder, say), with ETAGSTORE_AZURITE set.
func TestWithAzuriteRunsWhereCalled(t *testing.T) {
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "../../scripts/with-azurite", "sh", "-c", `pwd; test -n "$ETAGSTORE_AZURITE" && echo set`)
	cmd.Dir = here
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/with-azurite: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 || lines[len(lines)-2] != here || lines[len(lines)-1] != "set" {
		t.Errorf("scripts/with-azurite ran in %q; want %q with ETAGSTORE_AZURITE set:\n%s", lines, here, out)
	}
}
