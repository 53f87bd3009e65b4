package docstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/memdocstore"
	"gocloud.dev/gcerrors"

	edriver "github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

// order is the Order service's document.
type order struct {
	Name             string `docstore:"name"`
	Customer         string
	Total            float64
	At               time.Time
	DocstoreRevision any
}

// base is a time with nanoseconds below Edm.DateTime's 100 ns.
var base = time.Date(2026, 11, 26, 8, 0, 0, 123456789, time.FixedZone("CET", 3600))

// fidelity is one program on a collection: what it observes, as text, so
// that the same program on every backend can be compared with
// memdocstore's answers.
func fidelity(t *testing.T, coll *docstore.Collection) map[string]string {
	t.Helper()
	ctx := t.Context()
	got := map[string]string{}
	doc := map[string]any{"name": "m1", "Whole": 50.0, "Half": 62.5, "N": int64(3), "Attrs": map[string]any{"k": "v", "n": int64(1)}}
	if err := coll.Put(ctx, doc); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"name": "m1"}
	if err := coll.Get(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Whole", "Half", "N", "Attrs"} {
		got["map "+k] = fmt.Sprintf("%T %v", m[k], m[k])
	}
	if err := coll.Update(ctx, map[string]any{"name": "m1"}, docstore.Mods{"Whole": docstore.Increment(1), "N": docstore.Increment(1)}); err != nil {
		t.Fatal(err)
	}
	m = map[string]any{"name": "m1"}
	if err := coll.Get(ctx, m); err != nil {
		t.Fatal(err)
	}
	got["incremented Whole"] = fmt.Sprintf("%T %v", m["Whole"], m["Whole"])
	got["incremented N"] = fmt.Sprintf("%T %v", m["N"], m["N"])

	for i := range 30 {
		if err := coll.Put(ctx, &order{Name: fmt.Sprintf("o%02d", i), Customer: "alice", Total: 1, At: base.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(q *docstore.Query) string {
		n := 0
		it := q.Get(ctx)
		defer it.Stop()
		for {
			var o order
			err := it.Next(ctx, &o)
			if err != nil {
				break
			}
			n++
		}
		return fmt.Sprint(n)
	}
	got["At in [base+10h, base+20h)"] = count(coll.Query().Where("At", ">=", base.Add(10*time.Hour)).Where("At", "<", base.Add(20*time.Hour)))
	got["At = base"] = count(coll.Query().Where("At", "=", base))
	back := &order{Name: "o00"}
	if err := coll.Get(ctx, back); err != nil {
		t.Fatal(err)
	}
	got["At read back"] = back.At.Format(time.RFC3339Nano)
	return got
}

// The same program on the Go CDK's memdocstore (the reference),
// etagmem://, tables and blobs: floats stay float64
// (whole or not), ints int64, maps maps, an Increment keeps the member's
// type, and time filters find the documents at the stored precision
// (tables: 100 ns, UTC), the value passed compared as it is stored.
func TestSameProgramEverywhere(t *testing.T) {
	backends := []struct {
		name string
		b    func(t *testing.T) edriver.Backend
	}{
		{"etagmem", func(*testing.T) edriver.Backend { return memstore.New(nil) }},
		{"tables", func(t *testing.T) edriver.Backend {
			return tablestore.New(azuritetest.NewTable(t), &tablestore.Options{Partition: "p"})
		}},
		{"blobs", func(t *testing.T) edriver.Backend { return blobBackend(t, false) }},
	}
	results := map[string]map[string]string{}
	ref, err := memdocstore.OpenCollection("name", nil) // the Go CDK's own, the reference
	if err != nil {
		t.Fatal(err)
	}
	results["memdocstore"] = fidelity(t, ref)
	_ = ref.Close()
	for _, be := range backends {
		coll, err := OpenCollection(be.b(t), "name", nil)
		if err != nil {
			t.Fatal(err)
		}
		results[be.name] = fidelity(t, coll)
		_ = coll.Close()
	}
	want := map[string]string{
		"map Whole": "float64 50", "map Half": "float64 62.5", "map N": "int64 3", "map Attrs": "map[string]interface {} map[k:v n:1]",
		"incremented Whole": "float64 51", "incremented N": "int64 4",
		"At in [base+10h, base+20h)": "10", "At = base": "1",
	}
	var table strings.Builder
	table.WriteString("\n| observation | memdocstore | etagmem | tables | blobs |\n|---|---|---|---|---|\n")
	for _, k := range []string{"map Whole", "map Half", "map N", "map Attrs", "incremented Whole", "incremented N", "At in [base+10h, base+20h)", "At = base", "At read back"} {
		fmt.Fprintf(&table, "| %s | %s | %s | %s | %s |\n", k, results["memdocstore"][k], results["etagmem"][k], results["tables"][k], results["blobs"][k])
	}
	t.Log(table.String())
	for name, got := range results {
		// A time reads back as written (JSON keeps its zone and every
		// nanosecond), and on tables in UTC to 100 ns.
		want["At read back"] = base.Format(time.RFC3339Nano)
		if name == "tables" {
			want["At read back"] = base.UTC().Truncate(100).Format(time.RFC3339Nano)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// An Update that would move a document (its key or partition field) is
// refused before anything is sent; a missing key names the key field; a
// struct with the revision field stores no revision property; create=true
// makes the table.
func TestRefusalsAndSetup(t *testing.T) {
	ctx := t.Context()
	client := azuritetest.NewTable(t)
	coll, err := OpenCollection(tablestore.New(client, nil), "name", &Options{PartitionField: "Customer"})
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	if err := coll.Put(ctx, &order{Name: "o1", Customer: "alice", Total: 1}); err != nil {
		t.Fatal(err)
	}
	for _, mods := range []docstore.Mods{{"Customer": "bob"}, {"name": "o2"}} {
		err := coll.Update(ctx, &order{Name: "o1", Customer: "alice"}, mods)
		if gcerrors.Code(err) != gcerrors.InvalidArgument {
			t.Errorf("Update %v = %v, want InvalidArgument", mods, err)
		}
	}
	o := &order{Name: "o1", Customer: "alice"}
	if err := coll.Get(ctx, o); err != nil || o.Total != 1 {
		t.Errorf("after refused moves: %+v, %v", o, err)
	}
	resp, err := client.GetEntity(ctx, "alice", "o1", nil)
	if err != nil || strings.Contains(string(resp.Value), "DocstoreRevision") {
		t.Errorf("entity %s (%v): want no DocstoreRevision property", resp.Value, err)
	}
	type unkeyed struct{ ID, Customer string }
	err = coll.Put(ctx, &unkeyed{ID: "o9", Customer: "alice"})
	if gcerrors.Code(err) != gcerrors.InvalidArgument || !strings.Contains(err.Error(), `"name"`) {
		t.Errorf("Put of a document without the key field = %v, want InvalidArgument naming the key field", err)
	}

	missing := azuritetest.MissingTable(t)
	if _, err := OpenCollection(tablestore.New(missing, &tablestore.Options{Partition: "p"}), "name", &Options{Create: true}); err != nil {
		t.Fatalf("open with Create: %v", err)
	}
	c2, err := OpenCollection(tablestore.New(missing, &tablestore.Options{Partition: "p"}), "name", &Options{Create: true}) // exists now
	if err != nil {
		t.Fatalf("open with Create of an existing table: %v", err)
	}
	defer c2.Close()
	if err := c2.Put(ctx, &order{Name: "o1", Total: 2}); err != nil {
		t.Errorf("Put into the created table: %v", err)
	}
}
