package storetest

import (
	"errors"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
)

// addressed has a nested struct, which tables hold as a property of JSON.
type addressed struct {
	Title string
	Addr  struct{ City, Zip string }
}

// testRepeatedMembers: another program stored an object holding a member
// twice ({"City":"x","City":"y"}). A read shows what encoding/json makes
// of it (the later one); a write that starts from that read cannot apply
// its change without dropping one of them, so it is refused with
// ErrInvalidInput in one line and nothing is written; a Doc built by
// hand replaces the document whole.
func testRepeatedMembers(t *testing.T, b driver.Backend) {
	ctx := t.Context()
	s := etagstore.New[addressed](b, nil)
	data := `{"Title":"t","Addr":{"City":"x","City":"y","Zip":"1"}}`
	if b.Abilities().Codec != nil { // tables: the nested struct is a property of JSON
		data = `{"Title":"t","Addr":"{\"City\":\"x\",\"City\":\"y\",\"Zip\":\"1\"}"}`
	}
	if _, err := b.Write(ctx, "r", driver.Write{Data: []byte(data), Cond: driver.Cond{Kind: driver.CondCreate}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, "r")
	if err != nil || d.Value.Addr.City != "y" || d.Value.Addr.Zip != "1" {
		t.Fatalf("Get = %+v, %v; want City y (the later member), Zip 1", d.Value, err)
	}
	before, err := b.Read(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]error{}
	_, writes["Update"] = s.Update(ctx, "r", func(a *addressed) error { a.Addr.Zip = "2"; return nil })
	e := d
	e.Value.Addr.Zip = "2"
	_, writes["Replace"] = s.Replace(ctx, e)
	_, writes["Save"] = s.Save(ctx, d, e.Value, nil)
	for op, err := range writes {
		if !errors.Is(err, etagstore.ErrInvalidInput) {
			t.Errorf("%s over a document holding a member twice = %v, want ErrInvalidInput", op, err)
			continue
		}
		wantOneSentinel(t, err)
	}
	if after, err := b.Read(ctx, "r"); err != nil || after.ETag != before.ETag {
		t.Errorf("the refused writes changed the document: %v", err)
	}
	hand := etagstore.Doc[addressed]{Key: "r", ETag: etagstore.ETagAny, Value: e.Value}
	if _, err := s.Replace(ctx, hand); err != nil {
		t.Fatalf("Replace of a Doc built by hand: %v", err)
	}
	if got, err := s.Get(ctx, "r"); err != nil || got.Value != e.Value {
		t.Errorf("after the whole Replace: %+v, %v; want %+v", got.Value, err, e.Value)
	}
}
