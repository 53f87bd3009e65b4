package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// A caller's attributes (etagstore.WithAttributes): carried by a context,
// added to every span and metric data point a Recorder records under it.

type callerKey struct{}

// WithAttributes returns a context carrying the attributes ctx carries
// and kvs after them: on the same key the later value wins and keeps the
// earlier one's place. Invalid attributes (an empty key) are dropped. A
// call that adds nothing returns ctx itself.
func WithAttributes(ctx context.Context, kvs ...attribute.KeyValue) context.Context {
	prev := Attributes(ctx)
	var all []attribute.KeyValue
	for _, kv := range kvs {
		if !kv.Valid() {
			continue
		}
		if all == nil {
			all = make([]attribute.KeyValue, len(prev), len(prev)+len(kvs))
			copy(all, prev) // never appended to in place: ctx's slice is shared
		}
		if i := indexOf(all, kv.Key); i >= 0 {
			all[i] = kv
			continue
		}
		all = append(all, kv)
	}
	if all == nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, all)
}

func indexOf(kvs []attribute.KeyValue, k attribute.Key) int {
	for i, kv := range kvs {
		if kv.Key == k {
			return i
		}
	}
	return -1
}

// Attributes returns the attributes ctx carries (WithAttributes), in the
// order they were added, without duplicate keys; nil when it carries
// none. The slice is shared: do not modify it.
func Attributes(ctx context.Context) []attribute.KeyValue {
	kvs, _ := ctx.Value(callerKey{}).([]attribute.KeyValue)
	return kvs
}

// attrSet is the attributes of one kind of data point of a Recorder, and
// the options that record them, made once so that recording without a
// caller's attributes allocates nothing.
type attrSet struct {
	set attribute.Set
	rec []metric.RecordOption
	add []metric.AddOption
}

func newAttrSet(kvs ...attribute.KeyValue) attrSet {
	set := attribute.NewSet(kvs...)
	opt := metric.WithAttributeSet(set)
	return attrSet{set: set, rec: []metric.RecordOption{opt}, add: []metric.AddOption{opt}}
}

// recording returns the options that record a's attributes and caller's.
func (a *attrSet) recording(caller []attribute.KeyValue) []metric.RecordOption {
	if len(caller) == 0 {
		return a.rec
	}
	return []metric.RecordOption{metric.WithAttributeSet(a.with(caller))}
}

// adding is recording's for counters.
func (a *attrSet) adding(caller []attribute.KeyValue) []metric.AddOption {
	if len(caller) == 0 {
		return a.add
	}
	return []metric.AddOption{metric.WithAttributeSet(a.with(caller))}
}

// with returns a's attributes and caller's: the library's own win on a
// key both have, so that a caller cannot relabel etagstore.operation,
// etagstore.outcome or any other of them.
func (a *attrSet) with(caller []attribute.KeyValue) attribute.Set {
	kvs := make([]attribute.KeyValue, 0, len(caller)+a.set.Len())
	kvs = append(kvs, caller...)
	for it := a.set.Iter(); it.Next(); {
		kvs = append(kvs, it.Attribute())
	}
	return attribute.NewSet(kvs...) // the last value of a key wins
}
