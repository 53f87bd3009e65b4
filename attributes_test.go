package etagstore_test

import (
	"context"
	"errors"
	"maps"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"

	"github.com/etagstore/etagstore/driver"
)

// Tests of etagstore.WithAttributes: the attributes a caller's context
// carries are on every span and metric data point the library records for
// the call, beside the library's own, which keep their names and values.

// points returns every metric data point recorded so far, as
// "instrument{k=v,…}" (every attribute, sorted) with its value: a
// counter's sum, a histogram's count and sum ("… count", "… sum").
func (tel *telemetry) points(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	name := func(m string, set attribute.Set) string { return m + "{" + allAttrs(set.ToSlice()) + "}" }
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[name(m.Name, p.Attributes)] += p.Value
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out[name(m.Name, p.Attributes)+" count"] += int64(p.Count)
					out[name(m.Name, p.Attributes)+" sum"] += p.Sum
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[name(m.Name, p.Attributes)+" count"] += int64(p.Count)
				}
			default:
				t.Errorf("instrument %s: data of type %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// spanAttrs returns each span ended so far as "name{k=v,…}" (every
// attribute, sorted), in the order they ended.
func (tel *telemetry) spanAttrs() []string {
	var out []string
	for _, sp := range tel.spans.GetSpans() {
		out = append(out, sp.Name+"{"+allAttrs(sp.Attributes)+"}")
	}
	return out
}

func allAttrs(kvs []attribute.KeyValue) string {
	s := make([]string, len(kvs))
	for i, kv := range kvs {
		s[i] = string(kv.Key) + "=" + kv.Value.Emit()
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// withRoute is what a span or data point rendered as "name{…}" (or
// "name{…} count") becomes with route=/cards added: "route" sorts after
// every etagstore.* key.
func withRoute(s string) string {
	if strings.Contains(s, "{}") {
		return strings.Replace(s, "{}", "{route=/cards}", 1)
	}
	return strings.Replace(s, "}", ",route=/cards}", 1)
}

// What each operation records, on a Store over memstore whose version
// cache is empty and whose key "k" holds N 0, with the default options.
var attributeCases = []struct {
	name   string
	run    func(t *testing.T, ctx context.Context, s *etagstore.Store[counter], hb *hookBackend) error
	spans  []string
	points map[string]int64
}{{
	name: "Update",
	run: func(t *testing.T, ctx context.Context, s *etagstore.Store[counter], _ *hookBackend) error {
		_, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil })
		return err
	},
	spans: []string{"etagstore.Update{etagstore.attempts=1,etagstore.backend=etagstore_test,etagstore.batch_size=1,etagstore.cache_hit=false,etagstore.operation=Update,etagstore.outcome=ok}"},
	points: map[string]int64{
		"etagstore.operation.duration{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=ok} count": 1,
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=ok}":                 2, // read, write
		"etagstore.cache.lookups{etagstore.backend=etagstore_test,etagstore.result=miss}":                                      1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} count":                                                    1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} sum":                                                      1,
		"etagstore.batch.size{etagstore.backend=etagstore_test} count":                                                         1,
		"etagstore.batch.size{etagstore.backend=etagstore_test} sum":                                                           1,
	},
}, {
	name: "Get",
	run: func(t *testing.T, ctx context.Context, s *etagstore.Store[counter], _ *hookBackend) error {
		_, err := s.Get(ctx, "k")
		return err
	},
	spans: []string{"etagstore.Get{etagstore.backend=etagstore_test,etagstore.cache_hit=false,etagstore.operation=Get,etagstore.outcome=ok}"},
	points: map[string]int64{
		"etagstore.operation.duration{etagstore.backend=etagstore_test,etagstore.operation=Get,etagstore.outcome=ok} count": 1,
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Get,etagstore.outcome=ok}":                 1,
	},
}, {
	name: "Transact",
	run: func(t *testing.T, ctx context.Context, s *etagstore.Store[counter], _ *hookBackend) error {
		_, err := s.Transact(ctx, func(tx *etagstore.Tx[counter]) error {
			c, err := tx.Get("k")
			if err != nil {
				return err
			}
			c.N++
			return tx.Put("k", c)
		})
		return err
	},
	spans: []string{"etagstore.Transact{etagstore.attempts=1,etagstore.backend=etagstore_test,etagstore.batch_size=1,etagstore.operation=Transact,etagstore.outcome=ok}"},
	points: map[string]int64{
		"etagstore.operation.duration{etagstore.backend=etagstore_test,etagstore.operation=Transact,etagstore.outcome=ok} count": 1,
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Transact,etagstore.outcome=ok}":                 2, // read, commit
		"etagstore.cache.lookups{etagstore.backend=etagstore_test,etagstore.result=miss}":                                        1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} count":                                                      1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} sum":                                                        1,
		"etagstore.batch.size{etagstore.backend=etagstore_test} count":                                                           1,
		"etagstore.batch.size{etagstore.backend=etagstore_test} sum":                                                             1,
	},
}, {
	// The package-level Transact: recorded by the first Store it uses.
	name: "PackageTransact",
	run: func(t *testing.T, ctx context.Context, s *etagstore.Store[counter], _ *hookBackend) error {
		return etagstore.Transact(ctx, func(tx *etagstore.Txn) error {
			c, err := s.In(tx).Get("k")
			if err != nil {
				return err
			}
			c.N++
			return s.In(tx).Put("k", c)
		})
	},
	spans: []string{"etagstore.Transact{etagstore.attempts=1,etagstore.backend=etagstore_test,etagstore.batch_size=1,etagstore.operation=Transact,etagstore.outcome=ok}"},
	points: map[string]int64{
		"etagstore.operation.duration{etagstore.backend=etagstore_test,etagstore.operation=Transact,etagstore.outcome=ok} count": 1,
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Transact,etagstore.outcome=ok}":                 2, // read, commit
		"etagstore.cache.lookups{etagstore.backend=etagstore_test,etagstore.result=miss}":                                        1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} count":                                                      1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} sum":                                                        1,
		"etagstore.batch.size{etagstore.backend=etagstore_test} count":                                                           1,
		"etagstore.batch.size{etagstore.backend=etagstore_test} sum":                                                             1,
	},
}, {
	// An Update whose first write loses a race (a conflict absorbed) and
	// whose second write's answer is lost after it committed (a lost
	// response, resolved by a read).
	name: "UpdateRetriedAndLost",
	run: func(t *testing.T, ctx context.Context, s *etagstore.Store[counter], hb *hookBackend) error {
		hb.writeHook = func(wctx context.Context, key string, w driver.Write) (etagstore.ETag, error, bool) {
			switch nOf(w.Data) {
			case 1: // the first write: another writer comes first
				interfere(t, hb.Backend, key)
			case 101: // the second: committed, but the answer is lost
				if _, err := hb.Backend.Write(wctx, key, w); err != nil {
					return "", err, true
				}
				return "", errors.New("connection reset"), true
			}
			return "", nil, false
		}
		_, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil })
		return err
	},
	spans: []string{"etagstore.Update{etagstore.attempts=2,etagstore.backend=etagstore_test,etagstore.batch_size=1,etagstore.cache_hit=false,etagstore.operation=Update,etagstore.outcome=ok}"},
	points: map[string]int64{
		"etagstore.operation.duration{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=ok} count": 1,
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=ok}":                 4, // two reads, the write whose answer the hook drops (memstore counted it), the read that resolves it
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=conflict}":           1, // the first write
		"etagstore.conflicts{etagstore.backend=etagstore_test,etagstore.resolution=absorbed}":                                  1,
		"etagstore.lost_responses{etagstore.backend=etagstore_test,etagstore.verdict=committed}":                               1,
		"etagstore.cache.lookups{etagstore.backend=etagstore_test,etagstore.result=miss}":                                      1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} count":                                                    1,
		"etagstore.update.attempts{etagstore.backend=etagstore_test} sum":                                                      2,
		"etagstore.batch.size{etagstore.backend=etagstore_test} count":                                                         1,
		"etagstore.batch.size{etagstore.backend=etagstore_test} sum":                                                           1,
	},
}, {
	// A Replace with a stale ETag: a conflict returned.
	name: "ReplaceStale",
	run: func(t *testing.T, ctx context.Context, s *etagstore.Store[counter], _ *hookBackend) error {
		_, err := s.Replace(ctx, etagstore.Doc[counter]{Key: "k", ETag: `"0x0"`})
		if !errors.Is(err, etagstore.ErrConflict) {
			return err
		}
		return nil
	},
	spans: []string{"etagstore.Replace{etagstore.backend=etagstore_test,etagstore.operation=Replace,etagstore.outcome=conflict}"},
	points: map[string]int64{
		"etagstore.operation.duration{etagstore.backend=etagstore_test,etagstore.operation=Replace,etagstore.outcome=conflict} count": 1,
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Replace,etagstore.outcome=conflict}":                 1, // the write
		"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Replace,etagstore.outcome=ok}":                       1, // the read that tells a conflict from a deletion
		"etagstore.conflicts{etagstore.backend=etagstore_test,etagstore.resolution=returned}":                                         1,
	},
}}

// Each operation, with and without WithAttributes: without, its spans and
// data points carry exactly the library's attributes; with, every one of
// them carries the caller's too, and nothing else changes.
func TestWithAttributesLabelsEverySpanAndDataPoint(t *testing.T) {
	for _, c := range attributeCases {
		for _, tagged := range []bool{false, true} {
			name := c.name
			if tagged {
				name += "/WithAttributes"
			}
			t.Run(name, func(t *testing.T) {
				tel := newTelemetry(t)
				hb := &hookBackend{Backend: memstore.New(nil)}
				if _, err := etagstore.New[counter](hb.Backend, nil).Create(t.Context(), "k", counter{}); err != nil {
					t.Fatal(err)
				}
				s := etagstore.New[counter](hb, &tel.opts)
				ctx := t.Context()
				wantSpans, wantPoints := c.spans, c.points
				if tagged {
					ctx = etagstore.WithAttributes(ctx, attribute.String("route", "/cards"))
					wantSpans, wantPoints = nil, map[string]int64{}
					for _, s := range c.spans {
						wantSpans = append(wantSpans, withRoute(s))
					}
					for k, v := range c.points {
						wantPoints[withRoute(k)] = v
					}
				}
				if err := c.run(t, ctx, s, hb); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantSpans, tel.spanAttrs()); diff != "" {
					t.Errorf("spans (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantPoints, tel.points(t)); diff != "" {
					t.Errorf("data points (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// WithAttributes called twice adds up, the later value winning on a key
// given twice; an attribute with an empty key is dropped; a caller's
// attribute named as one of the library's does not change the library's.
// The parent context keeps its own attributes.
func TestWithAttributesAddUpAndLibraryKeysWin(t *testing.T) {
	tel := newTelemetry(t)
	mem := memstore.New(nil)
	if _, err := etagstore.New[counter](mem, nil).Create(t.Context(), "k", counter{}); err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[counter](mem, &tel.opts)
	parent := etagstore.WithAttributes(t.Context(), attribute.String("route", "/a"), attribute.String("tenant", "t1"))
	child := etagstore.WithAttributes(parent, attribute.String("route", "/b"), attribute.String("", "dropped"),
		attribute.String("etagstore.operation", "Mine"), attribute.String("etagstore.outcome", "mine"))
	if _, err := s.Get(child, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(parent, "k"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{
		"etagstore.Get{etagstore.backend=memstore,etagstore.cache_hit=false,etagstore.operation=Get,etagstore.outcome=ok,route=/b,tenant=t1}",
		"etagstore.Get{etagstore.backend=memstore,etagstore.cache_hit=false,etagstore.operation=Get,etagstore.outcome=ok,route=/a,tenant=t1}",
	}, tel.spanAttrs()); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{
		"etagstore.operation.duration{etagstore.backend=memstore,etagstore.operation=Get,etagstore.outcome=ok,route=/b,tenant=t1} count": 1,
		"etagstore.requests{etagstore.backend=memstore,etagstore.operation=Get,etagstore.outcome=ok,route=/b,tenant=t1}":                 1,
		"etagstore.operation.duration{etagstore.backend=memstore,etagstore.operation=Get,etagstore.outcome=ok,route=/a,tenant=t1} count": 1,
		"etagstore.requests{etagstore.backend=memstore,etagstore.operation=Get,etagstore.outcome=ok,route=/a,tenant=t1}":                 1,
	}, tel.points(t)); diff != "" {
		t.Errorf("data points (-want +got):\n%s", diff)
	}
}

// Group commit: a first Update (route /solo) writes alone while two more,
// /a then /b, queue and are committed together in one batch. Each
// caller's span, duration and attempts carry its own route; the batch's
// write, its cache lookup and its batch size carry those of the batch's
// first caller, /a.
func TestWithAttributesOfGroupedUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer runOutTimers()
		tel := newTelemetry(t)
		b := newStepBackend()
		s := etagstore.New[counter](b, &tel.opts)
		var wg sync.WaitGroup
		update := func(route string) {
			ctx := etagstore.WithAttributes(t.Context(), attribute.String("route", route))
			wg.Go(func() {
				if _, err := s.Update(ctx, "k", func(c *counter) error { c.N++; return nil }, etagstore.CreateIfMissing()); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait() // held at its write, or queued: the order of arrival is fixed
		}
		update("/solo")
		<-b.arrived // the first Update's write is held
		update("/a")
		update("/b")
		b.pass <- struct{}{}
		<-b.arrived // the batch's write
		b.pass <- struct{}{}
		wg.Wait()

		spans := tel.spanAttrs()
		sort.Strings(spans)
		if diff := cmp.Diff([]string{
			"etagstore.Update{etagstore.attempts=1,etagstore.backend=etagstore_test,etagstore.batch_size=1,etagstore.cache_hit=false,etagstore.operation=Update,etagstore.outcome=ok,route=/solo}",
			"etagstore.Update{etagstore.attempts=1,etagstore.backend=etagstore_test,etagstore.batch_size=2,etagstore.cache_hit=false,etagstore.operation=Update,etagstore.outcome=ok,route=/a}",
			"etagstore.Update{etagstore.attempts=1,etagstore.backend=etagstore_test,etagstore.batch_size=2,etagstore.cache_hit=false,etagstore.operation=Update,etagstore.outcome=ok,route=/b}",
		}, spans); diff != "" {
			t.Errorf("spans (-want +got):\n%s", diff)
		}
		want := map[string]int64{}
		for _, route := range []string{"/solo", "/a", "/b"} { // each caller's own
			want["etagstore.operation.duration{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=ok,route="+route+"} count"] = 1
			want["etagstore.update.attempts{etagstore.backend=etagstore_test,route="+route+"} count"] = 1
			want["etagstore.update.attempts{etagstore.backend=etagstore_test,route="+route+"} sum"] = 1
		}
		maps.Copy(want, map[string]int64{
			// The first Update, alone: a cache miss, a read finding nothing, its write.
			"etagstore.cache.lookups{etagstore.backend=etagstore_test,etagstore.result=miss,route=/solo}":                             1,
			"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=not_found,route=/solo}": 1,
			"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=ok,route=/solo}":        1,
			"etagstore.batch.size{etagstore.backend=etagstore_test,route=/solo} count":                                                1,
			"etagstore.batch.size{etagstore.backend=etagstore_test,route=/solo} sum":                                                  1,
			// The batch of /a and /b: starts from the cached copy, one write; all /a's.
			"etagstore.cache.lookups{etagstore.backend=etagstore_test,etagstore.result=hit,route=/a}":                       1,
			"etagstore.requests{etagstore.backend=etagstore_test,etagstore.operation=Update,etagstore.outcome=ok,route=/a}": 1,
			"etagstore.batch.size{etagstore.backend=etagstore_test,route=/a} count":                                         1,
			"etagstore.batch.size{etagstore.backend=etagstore_test,route=/a} sum":                                           2,
		})
		if diff := cmp.Diff(want, tel.points(t)); diff != "" {
			t.Errorf("data points (-want +got):\n%s", diff)
		}
	})
}
