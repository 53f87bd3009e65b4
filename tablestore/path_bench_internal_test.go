package tablestore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkTablePathVsJSON is the client's own work in one read-modify-write
// of a table document of 1, 16 or 64 KB (as UTF-16), without the network
// and the SDK (which both sides pay alike, see BenchmarkTableUpdateVsRaw):
// path=lean is the Backend's and the codec's (the entity read turned into
// an Item, decoded with its baseline encoding, the counter incremented,
// encoded, the write's body built); path=json is what a raw SDK loop does
// with encoding/json (the entity unmarshalled into a map, the counter
// incremented, the map marshalled). Both start from a fresh copy of the
// entity, as the SDK hands each read back. Run it with
//
//	go test -run '^$' -bench TablePathVsJSON -count 5 ./tablestore/
func BenchmarkTablePathVsJSON(b *testing.B) {
	type page struct {
		Title string
		Body  string
		N     int32
	}
	for _, size := range []int{1 << 10, 16 << 10, 64 << 10} {
		read, _ := json.Marshal(map[string]any{
			"odata.metadata": "http://127.0.0.1:10002/devstoreaccount1/$metadata#bench/@Element",
			"odata.etag":     `W/"datetime'2026-11-26T10%3A50%3A10.6545070Z'"`,
			"PartitionKey":   "p", "RowKey": "k",
			"Timestamp": "2026-11-26T10:50:10.6545070Z", "Timestamp@odata.type": "Edm.DateTime",
			"Title": "bench", "Body": strings.Repeat("0123456789abcdef", size/2/16), "N": 3,
			MetaProperty: "w=xvmbcrvb77apalgx,nmcxffnhphr3ycjh;l=fozongeexjdge6aa;n=2",
		})
		backend := &Backend{opts: Options{Partition: "p"}}
		b.Run(fmt.Sprintf("size=%dKB/path=lean", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				it, err := backend.item(append([]byte(nil), read...))
				if err != nil {
					b.Fatal(err)
				}
				var p page
				if base, err := (EntityCodec{}).Decode(it.Data, &p); err != nil || base == nil {
					b.Fatalf("Decode: %v", err)
				}
				p.N++
				data, err := EntityCodec{}.Marshal(&p)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := entity("p", "k", it.Meta, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%dKB/path=json", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var e map[string]any
				if err := json.Unmarshal(append([]byte(nil), read...), &e); err != nil {
					b.Fatal(err)
				}
				e["N"] = e["N"].(float64) + 1
				if _, err := json.Marshal(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
