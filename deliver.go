package etagstore

import (
	"context"
	"errors"
	"time"

	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file connects a Store to the one delivery engine (package
// internal/engine), through which every write reaches the backend: the
// engine's hooks (reads made as the Store makes them, events counted by
// its telemetry), and deliver, which runs one write and keeps in the
// version cache what it made.

type (
	keyWrite = engine.KeyWrite
	request  = engine.Request
)

// newEnv is the engine environment of c, whose fields are set.
func (c *core) newEnv() *engine.Env {
	return &engine.Env{
		Backend: c.b,
		Commit:  c.abilities.Commit,
		Policy:  c.retry,
		Clock:   c.clock,
		KeepIDs: c.keepIDs,
		Heat:    &c.heat,
		Hooks:   hooks{c.obs, c},
		Reentry: &c.reentry,
		// the hot-key hand-over (internal/turns)
		Contention: &c.turns,
	}
}

// delivery is the engine's delivery of a write of keys: op names it, p
// builds each attempt's request, start (Based) is the version to start
// from without reading, f the group-commit batch behind it (nil: none).
// The write carries ctx's fencing token.
func (c *core) delivery(ctx context.Context, op telemetry.Op, mode engine.Mode, keys []string, p engine.Plan, start []version, f engine.Flight) *engine.Delivery {
	fence, fenced := FenceFrom(ctx)
	return engine.New(c.env, op.String(), mode, keys, p, engine.Options{Start: start, Fence: fence, Fenced: fenced, Flight: f})
}

// deliver runs d and puts in the version cache the versions it wrote.
func (c *core) deliver(ctx context.Context, d *engine.Delivery) (engine.Result, error) {
	res, err := d.Run(ctx)
	if err == nil {
		c.cache.Written(res, false)
	}
	return res, err
}

// hooks are the engine's way to its Store (engine.Hooks): reads made as
// the Store makes them, and events counted by its recorder.
type hooks struct {
	*telemetry.Recorder
	c *core
}

func (h hooks) Read(ctx context.Context, key string) (version, error) {
	it, err := h.c.b.Read(ctx, key)
	h.c.cache.Note(key, it, err)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return version{}, err
	}
	return h.c.readVersion(key, it, err), nil
}

func (h hooks) StaleCopy(key string, etag ETag) { h.c.cache.Stale(key, etag, h.c.clock) }

func (h hooks) Attempted(ctx context.Context, attempt int, err error, delay time.Duration) {
	h.Attempt(ctx, attempt, err, delay)
}
