package etagstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/memstore"
)

// sentinelCodec is JSON whose Marshal or Unmarshal fails with an error
// matching a sentinel, as a backend's codec does for a value too large.
type sentinelCodec struct{ marshal, unmarshal error }

func (c sentinelCodec) Marshal(v any) ([]byte, error) {
	if c.marshal != nil {
		return nil, c.marshal
	}
	return json.Marshal(v)
}

func (c sentinelCodec) Unmarshal(data []byte, v any) error {
	if c.unmarshal != nil {
		return c.unmarshal
	}
	return json.Unmarshal(data, v)
}

// Encode and decode errors that already carry a sentinel print the
// "etagstore:" prefix once, and still match that sentinel.
func TestEncodeDecodeErrorPrefixOnce(t *testing.T) {
	type doc struct{ N int }
	b := memstore.New(nil)
	tooLarge := fmt.Errorf("%w: mycodec: field N is too large", etagstore.ErrTooLarge)
	s := etagstore.New[doc](b, &etagstore.Options{Codec: sentinelCodec{marshal: tooLarge}})
	_, err := s.Upsert(t.Context(), "k", doc{1})
	if !errors.Is(err, etagstore.ErrTooLarge) || !errors.Is(err, tooLarge) {
		t.Fatalf("Upsert = %v, want ErrTooLarge with the codec's error", err)
	}
	if got, want := err.Error(), `etagstore: encode "k": too large: mycodec: field N is too large`; got != want {
		t.Errorf("Upsert = %q, want %q", got, want)
	}

	if _, err := etagstore.New[doc](b, nil).Upsert(t.Context(), "k", doc{1}); err != nil {
		t.Fatal(err)
	}
	invalid := fmt.Errorf("%w: mycodec: bad bytes", etagstore.ErrInvalidInput)
	_, err = etagstore.New[doc](b, &etagstore.Options{Codec: sentinelCodec{unmarshal: invalid}}).Get(t.Context(), "k")
	if !errors.Is(err, etagstore.ErrInvalidInput) || !errors.Is(err, invalid) {
		t.Fatalf("Get = %v, want ErrInvalidInput with the codec's error", err)
	}
	if got := err.Error(); strings.Count(got, "etagstore:") != 1 || strings.ContainsAny(got, "\n") {
		t.Errorf("Get = %q, want one etagstore: prefix on one line", got)
	}
	t.Logf("decode: %s", err)
}
