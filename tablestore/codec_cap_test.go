package tablestore_test

import (
	"strings"
	"testing"

	"github.com/etagstore/etagstore/tablestore"
)

// One large document does not make the encodings of the small ones after
// it large: what the Store keeps of them (the version cache, memstore)
// holds about their own size.
func TestEncodingHoldsNoRoomOfALargerOne(t *testing.T) {
	type doc struct {
		Title string
		Body  string `table:"split"`
	}
	var c tablestore.EntityCodec
	if _, err := c.Marshal(doc{Title: "big", Body: strings.Repeat("x", 400_000)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		data, err := c.Marshal(doc{Title: "small"})
		if err != nil {
			t.Fatal(err)
		}
		if cap(data) > 2*len(data)+64 {
			t.Errorf("small encoding %d after a large one: %d bytes in a buffer of %d", i, len(data), cap(data))
		}
	}
}
