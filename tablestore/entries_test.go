package tablestore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/tablestore"
)

// Query, QueryPage (the Backend's and the typed ones) and ReadMany never
// yield an index entry or a fence record, though the table holds both
// beside the documents and a filter matches their properties; a fence
// record's key is refused by Read and Commit; an entry key with a name
// Key would not make is refused too. Scope validates the partition alone.
func TestEntriesAndRecordsNeverQueried(t *testing.T) {
	for name, opts := range map[string]*tablestore.Options{"Partition": {Partition: "p"}, "PartitionKey/RowKey": nil} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			client := azuritetest.NewTable(t)
			s := tablestore.NewStore[Task](client, opts, nil)
			var b *tablestore.Backend
			if !s.Backend().As(&b) {
				t.Fatal("no table backend")
			}
			key := func(rk string) string {
				if opts == nil {
					return "p/" + rk
				}
				return rk
			}
			for _, k := range []string{"a", "b", "gone"} {
				if _, err := s.Create(ctx, key(k), Task{Title: "ship it", Owner: k}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Delete(etagstore.WithFence(ctx, 7), key("gone"), etagstore.ETagAny); err != nil {
				t.Fatal(err)
			}
			e := b.Abilities().Entries
			scope, err := e.Scope(key("a"))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(map[string]string{"Doc": key("a"), "Title": "ship it", "Owner": "a"})
			entry := e.Key(scope, "title.ship-it")
			if _, err := b.Abilities().Commit(ctx, []driver.Action{{Key: entry, Write: driver.Write{Data: data, Cond: driver.Cond{Kind: driver.CondCreate}}}}); err != nil {
				t.Fatal(err)
			}
			// The table holds them all: the two documents, the entry and the record.
			raw := 0
			for pager := client.NewListEntitiesPager(nil); pager.More(); {
				page, err := pager.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				raw += len(page.Entities)
			}
			if raw != 4 {
				t.Fatalf("the table holds %d entities, want 4 (2 documents, an entry, a fence record)", raw)
			}
			want := []string{key("a"), key("b")}
			check := func(what string, keys []string) {
				t.Helper()
				if strings.Join(keys, " ") != strings.Join(want, " ") {
					t.Errorf("%s = %+q, want %+q", what, keys, want)
				}
			}
			for what, filter := range map[string]tablestore.Filter{
				"no filter":        {},
				"Title eq":         tablestore.Eq("Title", "ship it"),
				"RowKey ge \"\"":   tablestore.Ge("RowKey", ""),
				"RowKey gt U+FFFE": tablestore.Gt("RowKey", "\ufffe").Or(tablestore.Eq("Title", "ship it")),
			} {
				var keys []string
				for it, err := range b.Query(ctx, filter) {
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, it.Key)
				}
				check("Backend.Query "+what, keys)
				items, _, err := b.QueryPage(ctx, filter, "", 1000)
				if err != nil {
					t.Fatal(err)
				}
				keys = keys[:0]
				for _, it := range items {
					keys = append(keys, it.Key)
				}
				check("Backend.QueryPage "+what, keys)
				keys = keys[:0]
				for d, err := range tablestore.Query(ctx, s, filter) {
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, d.Key)
				}
				check("Query "+what, keys)
				p, err := tablestore.QueryPage(ctx, s, filter, 1, "")
				for keys = keys[:0]; ; {
					if err != nil {
						t.Fatal(err)
					}
					for _, d := range p.Docs {
						keys = append(keys, d.Key)
					}
					if p.Next == "" {
						break
					}
					p, err = tablestore.QueryPage(ctx, s, filter, 1, p.Next)
				}
				check("QueryPage by 1 "+what, keys)
			}
			items, err := b.Abilities().ReadMany(ctx, []string{key("a"), key("gone")})
			if err != nil || items[0].ETag == "" || items[1].ETag != "" {
				t.Errorf("ReadMany of a document and a fenced-deleted one = %+v, %v", items, err)
			}
			// Reserved row keys that are no entry's: refused by every call.
			record := key("\uffffh." + strings.Repeat("0", 64))
			for _, k := range []string{key("\ufffff.gone"), record, key("\uffffe."), key("\uffffe.a b"), key("\uffffe." + strings.Repeat("n", driver.MaxEntryName+1)), key("\uffffx")} {
				if _, err := b.Read(ctx, k); !errors.Is(err, etagstore.ErrInvalidKey) {
					t.Errorf("Read(%+q) = %v, want ErrInvalidKey", k, err)
				}
				_, err := b.Abilities().Commit(ctx, []driver.Action{{Key: k, Delete: true, Write: driver.Write{Cond: driver.IfMatch(etagstore.ETagAny)}}})
				var ae *driver.ActionError
				if !errors.As(err, &ae) || ae.Index != 0 || !errors.Is(err, etagstore.ErrInvalidKey) {
					t.Errorf("Commit deleting %+q = %v, want an ActionError matching ErrInvalidKey", k, err)
				}
			}
			// Scope validates the partition alone: what follows it may be
			// an index's value of any characters.
			if got, err := e.Scope(key("a value/#?\\")); got != scope || err != nil {
				t.Errorf("Scope of a value = %q, %v; want %q", got, err, scope)
			}
			if opts == nil {
				for _, k := range []string{"no-partition", "p#q/r", "/r"} {
					if _, err := e.Scope(k); !errors.Is(err, etagstore.ErrInvalidKey) {
						t.Errorf("Scope(%q) = %v, want ErrInvalidKey", k, err)
					}
				}
			}
			// The record is still there, and the entry.
			if _, err := client.GetEntity(ctx, "p", "\ufffff.gone", nil); err != nil {
				t.Errorf("the fence record: %v", err)
			}
			var resp aztables.GetEntityResponse
			if resp, err = client.GetEntity(ctx, "p", "\uffffe.title.ship-it", nil); err != nil || !strings.Contains(string(resp.Value), `"Doc"`) {
				t.Errorf("the entry's row: %s, %v", resp.Value, err)
			}
		})
	}
}
