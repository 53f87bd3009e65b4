package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/etagstore/etagstore"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// maxErrorLen bounds the text of an error a Store returns: one readable
// line, never a response dump.
const maxErrorLen = 1024

// oneLine reports what is wrong with err's text as a log line ("" if
// nothing).
func oneLine(err error) string {
	msg := err.Error()
	switch {
	case strings.ContainsAny(msg, "\r\n"):
		return "spans several lines"
	case len(msg) > maxErrorLen:
		return "is longer than 1024 bytes"
	}
	return ""
}

// wantOneLine fails t unless err's text is one line of bounded length.
func wantOneLine(t testing.TB, err error) {
	t.Helper()
	if what := oneLine(err); what != "" {
		t.Errorf("error text %s: %q", what, err.Error())
	}
}

// errorLines is a TracerProvider (the OpenTelemetry API's, recording
// nothing else) that checks the error text every Store operation that
// failed puts in its span's status — with Options.RecordKeys, the
// error's own text: every case of the suites runs with it, so every
// failing operation's error is checked to be one line.
type errorLines struct {
	embedded.TracerProvider
	t testing.TB

	mu   sync.Mutex
	done bool // the test has ended: t may no longer be used
}

// withErrorLines returns o with its spans checked by t (see errorLines).
func withErrorLines(t testing.TB, o etagstore.Options) *etagstore.Options {
	p := &errorLines{t: t}
	t.Cleanup(func() {
		p.mu.Lock()
		p.done = true
		p.mu.Unlock()
	})
	o.TracerProvider, o.RecordKeys = p, true
	return &o
}

func (p *errorLines) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return lineTracer{p: p}
}

type lineTracer struct {
	embedded.Tracer
	p *errorLines
}

func (tr lineTracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	sp := &lineSpan{p: tr.p}
	return trace.ContextWithSpan(ctx, sp), sp
}

type lineSpan struct {
	noop.Span
	p *errorLines
}

func (s *lineSpan) IsRecording() bool { return true }

func (s *lineSpan) SetStatus(code codes.Code, description string) {
	if code != codes.Error {
		return
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.done {
		return
	}
	switch {
	case strings.ContainsAny(description, "\r\n"):
		s.p.t.Errorf("a failed operation's error spans several lines: %q", description)
	case len(description) > maxErrorLen:
		s.p.t.Errorf("a failed operation's error is longer than %d bytes: %q", maxErrorLen, description)
	}
}
