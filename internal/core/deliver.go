package core

import (
	"context"
	"errors"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/engine"
	"github.com/etagstore/etagstore/internal/fence"
	"github.com/etagstore/etagstore/internal/telemetry"
)

// This file connects a Store to the one delivery engine (package
// internal/engine), through which every write reaches the backend: the
// engine's hooks (reads made as the Store makes them, events counted by
// its telemetry), and Deliver, which runs one write and keeps in the
// version cache what it made.

// NewEnv is the engine environment of c, whose fields are set.
func (c *Core) NewEnv() *engine.Env {
	return &engine.Env{
		Backend: c.Backend,
		Commit:  c.Abilities.Commit,
		Policy:  c.Retry,
		Clock:   c.Clock,
		KeepIDs: c.KeepIDs,
		Heat:    &c.Heat,
		Hooks:   hooks{c.Obs, c},
		Reentry: &c.Reentry,
		// the hot-key hand-over (internal/turns)
		Contention: &c.Turns,
	}
}

// Delivery is the engine's delivery of a write of keys: op names it, p
// builds each attempt's request, o holds its optional parts (Start, for
// a Based write the version to start from without reading; Flight, the
// group-commit batch behind it; TakeTurns). The write carries ctx's
// fencing token.
func (c *Core) Delivery(ctx context.Context, op telemetry.Op, mode engine.Mode, keys []string, p engine.Plan, o engine.Options) *engine.Delivery {
	o.Fence, o.Fenced = fence.From(ctx)
	return engine.New(c.Env, op.String(), mode, keys, p, o)
}

// Deliver runs d and puts in the version cache the versions it wrote.
func (c *Core) Deliver(ctx context.Context, d *engine.Delivery) (engine.Result, error) {
	res, err := d.Run(ctx)
	if err == nil {
		c.Cache.Written(res, false)
	}
	return res, err
}

// Blind delivers w, a write that starts from nothing: the request is the
// same on every attempt. It returns the version written (with a superseded ETag
// and no data when it was found committed with later writes after it); a definite refusal
// comes back as the backend reported it.
func (c *Core) Blind(ctx context.Context, op telemetry.Op, w engine.KeyWrite) (driver.Item, error) {
	req := engine.Request{w}
	p := engine.PlanFunc(func(*engine.Delivery, []engine.Version) (engine.Request, error) { return req, nil })
	res, err := c.Deliver(ctx, c.Delivery(ctx, op, engine.Blind, []string{w.Key}, p, engine.Options{}))
	if err != nil {
		return driver.Item{}, err
	}
	return res.Out[0], nil
}

// Based delivers p, a write of key that starts from the version start
// holds (nil: a read) — an Upsert or Create for a Store with indexes or
// expiry (plan.UpsertOver, plan.CreateOver) — and returns the version
// written.
func (c *Core) Based(ctx context.Context, op telemetry.Op, key string, p engine.Plan, start []engine.Version) (driver.Item, error) {
	res, err := c.Deliver(ctx, c.Delivery(ctx, op, engine.Based, []string{key}, p, engine.Options{Start: start}))
	if err != nil {
		return driver.Item{}, err
	}
	return res.Out[0], nil
}

// Read reads key as the engine's hooks do: through the backend, noting
// what it found in the version cache.
func (c *Core) Read(ctx context.Context, key string) (engine.Version, error) {
	return hooks{c.Obs, c}.Read(ctx, key)
}

// ReadAll reads keys as Read does, together where the backend can
// (driver.Abilities.ReadMany: on tables, one query per partition and 14
// keys), noting what it found in the version cache. A key found missing
// is a version with Missing set; any other failure is returned.
func (c *Core) ReadAll(ctx context.Context, keys []string) ([]engine.Version, error) {
	vs := make([]engine.Version, len(keys))
	many := c.Abilities.ReadMany
	if many == nil || len(keys) == 1 {
		for i, key := range keys {
			v, err := c.Read(ctx, key)
			if err != nil {
				return nil, err
			}
			vs[i] = v
		}
		return vs, nil
	}
	items, err := many(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		var missing error
		if it.ETag == "" {
			missing = driver.Errorf(driver.ErrNotFound, "%q", keys[i])
		}
		vs[i] = c.Noted(keys[i], it, missing)
	}
	return vs, nil
}

// Noted is the version a read of key found (it, or err matching
// ErrNotFound), noted in the version cache.
func (c *Core) Noted(key string, it driver.Item, err error) engine.Version {
	c.Cache.Note(key, it, err)
	return c.ReadVersion(key, it, err)
}

// hooks are the engine's way to its Store (engine.Hooks): reads made as
// the Store makes them, and events counted by its recorder (the retry
// loop's among them: Retrying, Attempted).
type hooks struct {
	*telemetry.Recorder
	c *Core
}

func (h hooks) Read(ctx context.Context, key string) (engine.Version, error) {
	it, err := h.c.Backend.Read(ctx, key)
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		h.c.Cache.Note(key, it, err)
		return engine.Version{}, err
	}
	return h.c.Noted(key, it, err), nil
}

func (h hooks) StaleCopy(key string, etag driver.ETag) { h.c.Cache.Stale(key, etag, h.c.Clock) }
