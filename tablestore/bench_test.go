package tablestore_test

import (
	"encoding/json"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// BenchmarkUncontendedUpdate compares one uncontended read-modify-write of a
// counter entity on Azurite: through Store.Update, and hand-written with the
// raw SDK (GetEntity, then UpdateEntity with IfMatch). The two alternate
// (raw, library, raw, library) so that neither gains from running while
// Azurite is warmer. Run it with
//
//	scripts/with-azurite go test -run '^$' -bench UncontendedUpdate -count 6 ./tablestore/
func BenchmarkUncontendedUpdate(b *testing.B) {
	client := azuritetest.NewTable(b)
	library := func(pk string) func(b *testing.B) {
		return func(b *testing.B) {
			s := tablestore.NewStore[Task](client, &tablestore.Options{Partition: pk}, nil)
			if _, err := s.Upsert(b.Context(), "k", Task{Title: "bench", Owner: "someone"}); err != nil {
				b.Fatal(err)
			}
			inc := func(t *Task) error { t.N++; return nil }
			for b.Loop() {
				if _, err := s.Update(b.Context(), "k", inc); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	raw := func(pk string) func(b *testing.B) {
		return func(b *testing.B) {
			ctx := b.Context()
			first, _ := json.Marshal(map[string]any{"PartitionKey": pk, "RowKey": "k", "Title": "bench", "Owner": "someone", "N": 0})
			if _, err := client.UpsertEntity(ctx, first, nil); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				resp, err := client.GetEntity(ctx, pk, "k", nil)
				if err != nil {
					b.Fatal(err)
				}
				var e map[string]any
				if err := json.Unmarshal(resp.Value, &e); err != nil {
					b.Fatal(err)
				}
				e["N"] = e["N"].(float64) + 1
				body, _ := json.Marshal(e)
				etag := resp.ETag
				if _, err := client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("rawSDK", raw("raw1"))
	b.Run("library", library("lib1"))
	b.Run("rawSDK", raw("raw2"))
	b.Run("library", library("lib2"))
}

// BenchmarkEntityCodec: encoding and decoding a typical document.
func BenchmarkEntityCodec(b *testing.B) {
	v := Task{Title: "write the benchmark", Owner: "someone", Done: true, N: 42}
	data, err := tablestore.EntityCodec{}.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := (tablestore.EntityCodec{}).Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t Task
			if err := (tablestore.EntityCodec{}).Unmarshal(data, &t); err != nil {
				b.Fatal(err)
			}
		}
	})
}
