package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// Faults configures fault injection, for the HTTP FaultProxy in front of
// Azurite and the FaultyBackend wrapper of any Backend alike. Probabilities
// are per write request (PUT, POST, PATCH, MERGE, DELETE; also reads when
// Reads is set); they are tried in the order listed and at most one applies.
type Faults struct {
	Seed uint64
	// DropAfterCommit forwards the request, lets the server commit it, and
	// then resets the connection instead of answering.
	DropAfterCommit float64
	// HangAfterCommit forwards the request and then holds the answer for
	// Hang before resetting, so the client's per-try timeout fires first.
	HangAfterCommit float64
	Hang            time.Duration
	// Unavailable answers 503 without forwarding.
	Unavailable float64
	// ServerError answers 500 without forwarding.
	ServerError float64
	// ResetMidBody forwards the request, sends the headers and half of the
	// body of the answer, and resets.
	ResetMidBody float64
	// Latency is added before forwarding every request.
	Latency time.Duration
	// Reads applies the probabilities to GET and HEAD requests too.
	Reads bool
}

type faultKind string

const (
	faultNone        faultKind = ""
	faultDrop        faultKind = "drop-after-commit"
	faultHang        faultKind = "hang-after-commit"
	faultUnavailable faultKind = "503"
	faultServerError faultKind = "500"
	faultMidBody     faultKind = "reset-mid-body"
)

// dice draws faults from a seeded source; safe for concurrent use.
type dice struct {
	mu     sync.Mutex
	rng    *rand.Rand
	f      Faults
	counts map[faultKind]int
}

func newDice(f Faults) *dice {
	return &dice{rng: rand.New(rand.NewPCG(f.Seed, 0x5eed)), f: f, counts: map[faultKind]int{}}
}

func (d *dice) roll(write bool) faultKind {
	if !write && !d.f.Reads {
		return faultNone
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.rng.Float64()
	for _, c := range []struct {
		p float64
		k faultKind
	}{{d.f.DropAfterCommit, faultDrop}, {d.f.HangAfterCommit, faultHang}, {d.f.Unavailable, faultUnavailable}, {d.f.ServerError, faultServerError}, {d.f.ResetMidBody, faultMidBody}} {
		if r < c.p {
			d.counts[c.k]++
			return c.k
		}
		r -= c.p
	}
	d.counts[faultNone]++
	return faultNone
}

func (d *dice) snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.counts {
		if k == faultNone {
			out["clean"] = v
		} else {
			out[string(k)] = v
		}
	}
	return out
}

// FaultProxy is an HTTP reverse proxy on 127.0.0.1 that injects Faults
// between an Azure SDK client and Azurite.
type FaultProxy struct {
	target string
	dice   *dice
	srv    *http.Server
	ln     net.Listener
	client *http.Client
}

// StartFaultProxy starts a proxy to target (e.g. "http://127.0.0.1:10002")
// and stops it when the test ends.
func StartFaultProxy(t testing.TB, target string, f Faults) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{
		target: strings.TrimRight(target, "/"),
		dice:   newDice(f),
		ln:     ln,
		// Idle connections go before Azurite (Node.js) closes them, at 5 s.
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 3 * time.Second}, Timeout: time.Minute},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	// When the test ends its requests have ended too: the proxy closes
	// every connection at once. A graceful Shutdown would wait for each
	// connection the client opened and has not used yet (net/http counts
	// it active for 5 s) until the client's idle timeout closed it: 3 s
	// of nothing after many a test.
	t.Cleanup(func() {
		_ = p.srv.Close()
		p.client.CloseIdleConnections()
	})
	return p
}

// URL returns the proxy's base URL.
func (p *FaultProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Counts returns how many requests got each fault ("clean": none).
func (p *FaultProxy) Counts() map[string]int { return p.dice.snapshot() }

func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// ServeHTTP forwards one request, injecting at most one fault.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fault := p.dice.roll(isWrite(r.Method))
	if p.dice.f.Latency > 0 {
		time.Sleep(p.dice.f.Latency)
	}
	switch fault {
	case faultUnavailable:
		// Azure's throttling answer: refused before it was processed.
		w.Header().Set("x-ms-error-code", "ServerBusy")
		http.Error(w, "injected 503 ServerBusy", http.StatusServiceUnavailable)
		return
	case faultServerError:
		http.Error(w, "injected 500", http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.ContentLength = int64(len(body))
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	switch fault {
	case faultHang:
		time.Sleep(p.dice.f.Hang)
		fallthrough
	case faultDrop:
		reset(w)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	if fault == faultMidBody && len(answer) > 1 {
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer[:len(answer)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		reset(w)
		return
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// reset closes the client's connection without an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST rather than FIN
	}
	_ = conn.Close()
}

// FaultyBackend wraps a Backend with the same faults at the contract level,
// the way the Azure SDK pipeline would surface them: a response dropped
// after commit comes back either as a transport error or — as after the
// SDK's retry of the request — as the answer to a second try, marked
// driver.ErrAmbiguous; a 503 or 500 leaves the write undone.
type FaultyBackend struct {
	driver.Backend
	dice *dice
}

// NewFaultyBackend wraps b with faults f.
func NewFaultyBackend(b driver.Backend, f Faults) *FaultyBackend {
	return &FaultyBackend{Backend: b, dice: newDice(f)}
}

// Counts returns how many writes got each fault ("clean": none).
func (f *FaultyBackend) Counts() map[string]int { return f.dice.snapshot() }

var errInjected = errors.New("storetest: injected transport failure (connection reset)")

// Write applies a fault to the write.
func (f *FaultyBackend) Write(ctx context.Context, key string, w driver.Write) (etagstore.ETag, error) {
	switch f.dice.roll(true) {
	case faultUnavailable:
		return "", fmt.Errorf("%w: storetest: injected 503 ServerBusy", driver.ErrNotApplied)
	case faultServerError:
		return "", fmt.Errorf("storetest: injected 500: %w", errInjected)
	case faultDrop, faultHang, faultMidBody:
		_, _ = f.Backend.Write(ctx, key, w)
		if f.dice.coin() || !retrySafe(w.Cond) {
			return "", errInjected
		}
		etag, err := f.Backend.Write(ctx, key, w) // the SDK's retry
		if err != nil {
			return "", fmt.Errorf("%w (after 2 tries): %w", driver.ErrAmbiguous, err)
		}
		return etag, nil
	}
	return f.Backend.Write(ctx, key, w)
}

// Delete applies a fault to the delete.
func (f *FaultyBackend) Delete(ctx context.Context, key string, etag driver.ETag) error {
	switch f.dice.roll(true) {
	case faultUnavailable:
		return fmt.Errorf("%w: storetest: injected 503 ServerBusy", driver.ErrNotApplied)
	case faultServerError:
		return fmt.Errorf("storetest: injected 500: %w", errInjected)
	case faultDrop, faultHang, faultMidBody:
		_ = f.Backend.Delete(ctx, key, etag)
		if f.dice.coin() || !retrySafe(driver.IfMatch(etag)) {
			return errInjected
		}
		if err := f.Backend.Delete(ctx, key, etag); err != nil {
			return fmt.Errorf("%w (after 2 tries): %w", driver.ErrAmbiguous, err)
		}
		return nil
	}
	return f.Backend.Delete(ctx, key, etag)
}

// Abilities forwards b's, with Commit through the same faults as Write.
func (f *FaultyBackend) Abilities() driver.Abilities {
	a := f.Backend.Abilities()
	if commit := a.Commit; commit != nil {
		a.Commit = func(ctx context.Context, actions []driver.Action) ([]driver.ETag, error) {
			return f.commit(ctx, commit, actions)
		}
	}
	return a
}

// commit applies a fault to a commit. A lost answer is always a transport
// error: a commit conditioned on nothing but creates and checks would not
// fail on a retry of itself.
func (f *FaultyBackend) commit(ctx context.Context, commit func(context.Context, []driver.Action) ([]driver.ETag, error), actions []driver.Action) ([]driver.ETag, error) {
	switch f.dice.roll(true) {
	case faultUnavailable:
		return nil, fmt.Errorf("%w: storetest: injected 503 ServerBusy", driver.ErrNotApplied)
	case faultServerError:
		return nil, fmt.Errorf("storetest: injected 500: %w", errInjected)
	case faultDrop, faultHang, faultMidBody:
		_, _ = commit(ctx, actions)
		return nil, errInjected
	}
	return commit(ctx, actions)
}

// retrySafe reports whether an SDK-style blind retry of a request with
// cond is one the condition makes harmless (it fails if the first try
// landed). The Azure backends turn the SDK's retries off, so an
// unconditional or If-Match: * request whose answer is lost comes back as
// a transport error, never as a second try that could apply it twice.
func retrySafe(c driver.Cond) bool {
	return c.Kind == driver.CondCreate || c.Kind == driver.CondIfMatch && c.ETag != etagstore.ETagAny
}

// List passes through (it only reads).
func (f *FaultyBackend) List(ctx context.Context, prefix string) iter.Seq2[driver.Item, error] {
	return f.Backend.List(ctx, prefix)
}

func (d *dice) coin() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(2) == 0
}
