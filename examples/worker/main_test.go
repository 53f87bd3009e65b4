package main

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/internal/smoke"
)

// docs/blobs-and-locking.md's `scripts/with-azurite go run ./examples/worker`, run as a
// program with its defaults (12 items, 4 duplicate deliveries, 4 workers;
// Azurite through ETAGSTORE_AZURITE): it must end on its own, process every
// item once, fail none, and leave the queue empty. TestDuplicatesAndCrash
// tests the workers in process; this runs main.
func TestMainSmoke(t *testing.T) {
	azuritetest.ConnectionString(t) // fails, never skips, without Azurite
	bin := smoke.Build(t)
	out, errOut := smoke.Run(t, 60*time.Second, bin)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		t.Logf("stdout:\n%s\nstderr:\n%s", smoke.Indent(out), smoke.Indent(errOut))
	}
	find := func(re string) []int {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + re + `$`).FindStringSubmatch(out)
		if m == nil {
			fail("no line matching %q", re)
			return nil
		}
		n := make([]int, len(m)-1)
		for i, s := range m[1:] {
			n[i], _ = strconv.Atoi(s)
		}
		return n
	}

	const items, deliveries = 12, 16 // main's defaults
	if n := find(`received (\d+), acknowledged as duplicates (\d+), left for later \(lock busy\) (\d+), processed (\d+), failed (\d+)`); n != nil {
		received, processed, failed := n[0], n[3], n[4]
		if received < deliveries {
			fail("received %d deliveries, want at least the %d enqueued", received, deliveries)
		}
		if processed != items || failed != 0 {
			fail("processed %d and failed %d, want %d and 0", processed, failed, items)
		}
	}
	if n := find(`(\d+) items, (\d+) deliveries: the expensive step ran (\d+) times`); n != nil {
		if n[0] != items || n[1] != deliveries {
			fail("%d items and %d deliveries, want main's defaults %d and %d", n[0], n[1], items, deliveries)
		}
		if n[2] != items {
			fail("the expensive step ran %d times for %d items: want once per item (no worker crashed)", n[2], items)
		}
	}
	find(`queue work\d+ drained`)
	if errOut != "" {
		t.Logf("stderr:\n%s", smoke.Indent(errOut))
	}
}
