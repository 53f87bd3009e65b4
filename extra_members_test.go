package etagstore_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

type labelled struct {
	Labels map[string]int `json:"labels"`
}

// TestUpdateMapKeyCaseOnlyRename: another program (Python, JS: unsorted
// keys) wrote the map; T renames a key by case only. Map keys are matched
// exactly, as encoding/json matches them, so the rename is stored.
func TestUpdateMapKeyCaseOnlyRename(t *testing.T) {
	ctx := context.Background()
	b := memstore.New(nil)
	raw := etagstore.New[json.RawMessage](b, nil)
	if _, err := raw.Upsert(ctx, "k", json.RawMessage(`{"labels":{"prod":1,"env":2}}`)); err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[labelled](b, nil)
	d, err := s.Update(ctx, "k", func(v *labelled) error {
		delete(v.Labels, "env")
		v.Labels["ENV"] = 2
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"ENV": 2, "prod": 1}
	if !reflect.DeepEqual(d.Value.Labels, want) {
		t.Errorf("Update returned %v", d.Value.Labels)
	}
	got, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := raw.Get(ctx, "k")
	if !reflect.DeepEqual(got.Value.Labels, want) {
		t.Errorf("stored %s decodes %v, want %v", r.Value, got.Value.Labels, want)
	}
}

type small struct {
	T string `json:"t"`
}

// TestWithoutDropsOnlyItsMember: Extra.Without("a") drops "a" and keeps
// another unknown member "a@x" (only "a@odata.type" annotates "a").
func TestWithoutDropsOnlyItsMember(t *testing.T) {
	ctx := context.Background()
	b := memstore.New(nil)
	raw := etagstore.New[json.RawMessage](b, nil)
	if _, err := raw.Upsert(ctx, "k", json.RawMessage(`{"t":"1","a":1,"a@x":2}`)); err != nil {
		t.Fatal(err)
	}
	s := etagstore.New[small](b, nil)
	d, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("names before: %v", d.Extra.Names())
	d.Extra = d.Extra.Without("a")
	t.Logf("names after: %v", d.Extra.Names())
	d.Value.T = "2"
	if _, err := s.Replace(ctx, d); err != nil {
		t.Fatal(err)
	}
	r, _ := raw.Get(ctx, "k")
	var m map[string]any
	json.Unmarshal(r.Value, &m)
	if _, ok := m["a@x"]; !ok {
		t.Errorf("stored %s: member a@x, not named to Without, was removed", r.Value)
	}
}
