package etagstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/memstore"
)

type cityDoc struct {
	Title string
	Addr  struct{ City, Zip string }
}

func seedRaw(t *testing.T, b driver.Backend, key, data string) {
	t.Helper()
	if _, err := b.Write(context.Background(), key, driver.Write{Data: []byte(data), Cond: driver.Cond{Kind: driver.CondCreate}}); err != nil {
		t.Fatal(err)
	}
}

// encoding/json matches a member to a field by its name folded: an
// object holding "City" and "city" is, to the decoder, an object holding
// City twice (the later one is read). A write over it that changes City
// must not land on the occurrence the read did not show.
func TestRepeatedMembersFoldedNames(t *testing.T) {
	b := memstore.New(nil)
	s := etagstore.New[cityDoc](b, nil)
	seedRaw(t, b, "r", `{"Title":"t","Addr":{"City":"x","city":"y","Zip":"1"}}`)
	d, err := s.Get(t.Context(), "r")
	if err != nil || d.Value.Addr.City != "y" {
		t.Fatalf("Get = %+v, %v; want City y (the later member)", d.Value, err)
	}
	u, err := s.Update(t.Context(), "r", func(c *cityDoc) error { c.Addr.City = "z"; return nil })
	if errors.Is(err, etagstore.ErrInvalidInput) {
		return // refused: fine
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "r")
	raw, _ := b.Read(t.Context(), "r")
	if err != nil || got.Value != u.Value {
		t.Errorf("Update returned %+v, the next Get %+v (%v); stored %s: the change went to the occurrence the read did not show", u.Value, got.Value, err, raw.Data)
	}
}

// An escaped name is the same member as its plain spelling.
func TestRepeatedMembersEscapedNames(t *testing.T) {
	b := memstore.New(nil)
	s := etagstore.New[cityDoc](b, nil)
	seedRaw(t, b, "r", `{"Title":"t","Addr":{"City":"x","\u0043ity":"y","Zip":"1"}}`)
	_, err := s.Update(t.Context(), "r", func(c *cityDoc) error { c.Addr.Zip = "2"; return nil })
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Errorf("Update over City spelled twice (once escaped) = %v, want ErrInvalidInput", err)
	}
}

// The refusal is one line, whatever the repeated member's name holds.
func TestRepeatedMembersRefusalOneLine(t *testing.T) {
	b := memstore.New(nil)
	type loose struct {
		Title string
		More  map[string]int
	}
	s := etagstore.New[loose](b, nil)
	seedRaw(t, b, "r", `{"Title":"t","More":{"a\nb":1,"a\nb":2}}`)
	_, err := s.Update(t.Context(), "r", func(c *loose) error { c.Title = "u"; return nil })
	if !errors.Is(err, etagstore.ErrInvalidInput) {
		t.Fatalf("Update = %v, want ErrInvalidInput", err)
	}
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("the refusal's text spans lines: %q", err.Error())
	}
}

// Not repeated: members of the same name in different objects of an
// array, in sibling objects, and a name that only looks like a path.
func TestRepeatedMembersNoFalsePositive(t *testing.T) {
	b := memstore.New(nil)
	type item struct{ Name string }
	type listDoc struct {
		Items []item
		A, B  struct{ Name string }
		M     map[string]int
	}
	s := etagstore.New[listDoc](b, nil)
	seedRaw(t, b, "r", `{"Items":[{"Name":"a"},{"Name":"b"}],"A":{"Name":"x"},"B":{"Name":"y"},"M":{"A.Name":1,"A":2,"x\"y":3,"x\\\"y":4},"Extra":[[{"k":1}],[{"k":2}]]}`)
	if _, err := s.Update(t.Context(), "r", func(c *listDoc) error { c.A.Name = "z"; return nil }); err != nil {
		t.Errorf("Update of a valid document = %v", err)
	}
}
