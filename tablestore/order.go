package tablestore

import (
	"strings"

	"github.com/etagstore/etagstore/driver"
)

// Key order. The Table service returns entities by PartitionKey, then
// RowKey, each compared by UTF-16 code units, and List and ListPage yield
// keys in that order: a listing is one streaming query, however many
// partitions it crosses, and a page one query that resumes after a key.
//
// With Options.Partition keys are row keys, and the order is
// driver.CompareKeys. Without it keys are "PartitionKey/RowKey", and the
// order is the table's: compareKeys, which the Backend declares in its
// Abilities. It is driver.CompareKeys of the whole key but for one case: a
// partition P and an extension of it by a character below '/' (space,
// '!', '-', '.', …), such as "a" and "a-b". The table puts "a/y" before
// "a-b/x"; by the characters of the whole key ('/' is above '-') it would
// come after. (Table keys hold no '/', so "P/" never prefixes another
// partition's keys, and nothing else can tell the two orders apart.)

// compareKeys is the table's order of "PartitionKey/RowKey" keys: by
// PartitionKey, then RowKey, each by UTF-16 code units. A string without
// '/' (not a key, but the order is total) is a PartitionKey with an empty
// RowKey.
func compareKeys(a, b string) int {
	pa, ra, _ := strings.Cut(a, "/")
	pb, rb, _ := strings.Cut(b, "/")
	if c := driver.CompareKeys(pa, pb); c != 0 {
		return c
	}
	return driver.CompareKeys(ra, rb)
}

// keyOrder is the order List and ListPage yield keys in: nil (the
// default, driver.CompareKeys) with Options.Partition, compareKeys without.
func (b *Backend) keyOrder() func(a, b string) int {
	if b.opts.Partition != "" {
		return nil
	}
	return compareKeys
}
