package index

import (
	"encoding/json"
	"fmt"

	"github.com/etagstore/etagstore/driver"
)

// Entry is what an entry holds: the index, the whole value, and the key
// of the document holding it. It is stored as a JSON object of these
// three string members (driver.Entries).
type Entry struct {
	Index string
	Value string
	Doc   string
}

// data is e as stored.
func (e Entry) data() []byte {
	b, _ := json.Marshal(e) // three strings: never fails
	return b
}

// decode reads an entry from its stored item.
func decode(it driver.Item) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(it.Data, &e); err != nil || e.Doc == "" {
		return Entry{}, fmt.Errorf("index entry %q cannot be read: %v", it.Key, err)
	}
	return e, nil
}
