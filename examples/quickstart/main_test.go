package main

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/etagstore/etagstore/internal/smoke"
)

// The README's `go run ./examples/quickstart`, run to its end: it must not
// hang or fail, writer B must get its 412 and retry, and the counter must be
// exact after the 2000 concurrent Updates.
func TestMainSmoke(t *testing.T) {
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

	find(`writer A saved hits = 1`)
	find(`writer B got 412: stored hits = 1, B wanted 1`)
	saved := find(`writer B saved hits = (\d+) after (\d+) attempts`)
	if saved != nil && saved[1] < 2 {
		fail("writer B saved after %d attempts: its stale If-Match was not retried", saved[1])
	}
	final := find(`after 2000 concurrent Updates: hits = (\d+) \((\d+) \+ 2000\), mutate ran (\d+) times \((\d+) retries after 412\)`)
	if final != nil {
		hits, before, calls, retries := final[0], final[1], final[2], final[3]
		if hits != before+2000 {
			fail("hits = %d after 2000 increments of %d: want exactly %d", hits, before, before+2000)
		}
		if saved != nil && before != saved[0] {
			fail("the 2000 Updates started from %d, but writer B saved %d", before, saved[0])
		}
		if calls != 2000+retries {
			fail("mutate ran %d times with %d retries: want 2000 + retries", calls, retries)
		}
	}
	if m := regexp.MustCompile(`(?m)^Replace without ETag: (.*)$`).FindStringSubmatch(out); m == nil || m[1] == "<nil>" {
		fail("a Replace without an ETag must be refused (ErrETagRequired)")
	}
	find(`Replace with ETagAny: hits = 0`)
	if errOut != "" {
		fail("the quickstart wrote to stderr")
	}
}
