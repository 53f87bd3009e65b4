package tablestore_test

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etagstore/etagstore/internal/azuritetest"
)

// azuriteCPU returns a clock of the CPU time the Azurite process serving
// the tests' tables has used (every thread, in nanoseconds, from Linux's
// /proc/PID/task/*/schedstat), so that a benchmark can show what a
// request costs the service as well as the client. Where Azurite's
// process cannot be found or read (another system, Azurite elsewhere) the
// clock reads zero.
func azuriteCPU(b *testing.B) func() time.Duration {
	pid := azuritePID(b)
	if pid == "" {
		return func() time.Duration { return 0 }
	}
	return func() time.Duration { return threadsCPU(pid) }
}

// azuritePID is the process id of the Azurite listening on the table port
// of the tests' connection string: the process started with that
// "--tablePort" (as scripts/with-azurite starts it), or "".
func azuritePID(b *testing.B) string {
	u, err := url.Parse(azuritetest.Host(b, "Table"))
	if err != nil || u.Port() == "" {
		return ""
	}
	arg := []byte("\x00--tablePort\x00" + u.Port() + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err == nil && bytes.Contains(append(cmd, 0), arg) {
			return filepath.Base(filepath.Dir(p))
		}
	}
	return ""
}

// threadsCPU sums the time on CPU of the threads of process pid.
func threadsCPU(pid string) time.Duration {
	stats, _ := filepath.Glob("/proc/" + pid + "/task/*/schedstat")
	var sum time.Duration
	for _, s := range stats {
		data, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(data), " ")
		ns, _ := strconv.ParseInt(first, 10, 64)
		sum += time.Duration(ns)
	}
	return sum
}
