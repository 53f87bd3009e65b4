package tablestore_test

// Fence records under contention, failures and odd keys, and the stale
// parts a blind merge leaves.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/etagstore/etagstore"
	"github.com/etagstore/etagstore/internal/azuritetest"
	"github.com/etagstore/etagstore/memstore"
	"github.com/etagstore/etagstore/tablestore"
)

type fenceCard struct {
	Title string
	N     int64
}

// hookableTable returns a fresh table's name and a plain client for it.
func hookableTable(t *testing.T) (string, *aztables.Client) {
	t.Helper()
	name := azuritetest.Name("probe")
	svc, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(t), &aztables.ClientOptions{ClientOptions: azuritetest.Options})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateTable(t.Context(), name, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), name, nil) })
	return name, svc.NewClient(name)
}

// hookedTable returns a client of table name whose requests pass p.
func hookedTable(t *testing.T, name string, p policy.Policy) *aztables.Client {
	t.Helper()
	opts := azuritetest.Options
	opts.PerCallPolicies = []policy.Policy{p}
	svc, err := aztables.NewServiceClientFromConnectionString(azuritetest.ConnectionString(t), &aztables.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return svc.NewClient(name)
}

// afterRecordRead runs hook, on the caller's goroutine, after each
// answered GET of a fence record (a RowKey starting with U+FFFF).
type afterRecordRead struct{ hook func() }

func (p *afterRecordRead) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	u := req.Raw().URL
	if err == nil && req.Raw().Method == http.MethodGet && (strings.Contains(u.EscapedPath(), "%EF%BF%BF") || strings.Contains(u.Path, "\uFFFF")) {
		p.hook()
	}
	return resp, err
}

// TestFenceKeptThroughUnfencedWrites: memstore and tablestore keep the
// token of the last fenced create or delete of a key through unfenced
// writes and deletes (see WithFence), alike: a later fenced create with a
// lower token stays refused with ErrFenced.
func TestFenceKeptThroughUnfencedWrites(t *testing.T) {
	_, client := hookableTable(t)
	stores := map[string]*etagstore.Store[fenceCard]{
		"memstore":   etagstore.New[fenceCard](memstore.New(nil), nil),
		"tablestore": tablestore.NewStore[fenceCard](client, &tablestore.Options{Partition: "p"}, nil),
	}
	for _, name := range []string{"memstore", "tablestore"} {
		s := stores[name]
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }

			// A fenced create, then the history is cut by an unfenced
			// Upsert and the key deleted unfenced: no token is kept.
			if _, err := s.Create(at(12), "j", fenceCard{Title: "12's"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Upsert(ctx, "j", fenceCard{Title: "unfenced"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "j", etagstore.ETagAny); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Create(at(5), "j", fenceCard{Title: "5's"}); !errors.Is(err, etagstore.ErrFenced) {
				t.Errorf("fenced Create(5) after a fenced Create(12), an unfenced Upsert and an unfenced Delete = %v, want ErrFenced", err)
			}

			// A fenced delete's token, forgotten by an unfenced create,
			// then the key deleted unfenced.
			if _, err := s.Create(at(3), "k", fenceCard{}); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(at(10), "k", etagstore.ETagAny); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Create(ctx, "k", fenceCard{Title: "unfenced"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "k", etagstore.ETagAny); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Update(at(5), "k", func(c *fenceCard) error { c.N = 5; return nil }, etagstore.CreateIfMissing()); !errors.Is(err, etagstore.ErrFenced) {
				t.Errorf("fenced Update(CreateIfMissing, 5) after a fenced Delete(10), an unfenced Create and Delete = %v, want ErrFenced", err)
			}
			if _, err := s.Create(at(10), "k", fenceCard{}); err != nil {
				t.Errorf("fenced Create with the kept token: %v", err)
			}
		})
	}
}

// TestFencedCreateRacesRecordUntilItsTime: a fenced Create reads the
// key's record and commits with it conditioned on what it read, reading
// again on a race. Another holder of the same token creating and deleting
// the key right after each of the first reads does not make it fail:
// contention is bounded by time, not by a count.
func TestFencedCreateRacesRecordUntilItsTime(t *testing.T) {
	ctx := t.Context()
	name, plain := hookableTable(t)
	opts := &tablestore.Options{Partition: "p"}
	other := tablestore.NewStore[fenceCard](plain, opts, nil)
	var races atomic.Int32
	hook := &afterRecordRead{}
	hook.hook = func() {
		if races.Add(1) > 8 {
			return
		}
		octx := etagstore.WithFence(context.WithoutCancel(ctx), 5)
		if _, err := other.Create(octx, "k", fenceCard{Title: "theirs"}); err != nil {
			t.Errorf("the other holder's Create: %v", err)
			return
		}
		if err := other.Delete(octx, "k", etagstore.ETagAny); err != nil {
			t.Errorf("the other holder's Delete: %v", err)
		}
	}
	s := tablestore.NewStore[fenceCard](hookedTable(t, name, hook), opts, nil)
	_, err := s.Create(etagstore.WithFence(ctx, 5), "k", fenceCard{Title: "mine"})
	t.Logf("fenced Create after %d record races: %v", races.Load(), err)
	if err != nil {
		t.Errorf("fenced Create(5), losing 8 record races to a holder of the same token = %v; want nil", err)
		for _, sentinel := range []error{etagstore.ErrConflict, etagstore.ErrExists} {
			if errors.Is(err, sentinel) {
				t.Errorf("the error matches %v, though the key is missing and the token allowed", sentinel)
			}
		}
	}
}

// TestFenceRecordPKRK: a table without Options.Partition ("pk/rk"
// keys, listing across partitions): a fenced Delete keeps the token in
// the key's partition, a stale create is refused, and paging one by one
// across partitions whose records sort between the documents neither
// skips nor repeats a document. A row key long enough to be hashed too.
func TestFenceRecordPKRK(t *testing.T) {
	ctx := t.Context()
	_, client := hookableTable(t)
	s := tablestore.NewStore[fenceCard](client, nil, nil)
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	long := "b/" + strings.Repeat("r", 511)
	var want []string
	for _, pk := range []string{"a", "b", "c"} {
		for _, rk := range []string{"1", "2", "3"} {
			key := pk + "/" + rk
			if _, err := s.Create(at(1), key, fenceCard{Title: key}); err != nil {
				t.Fatal(err)
			}
			if rk == "2" { // buried: a record sorts after the partition's documents
				if err := s.Delete(at(4), key, etagstore.ETagAny); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want = append(want, key)
		}
	}
	if _, err := s.Create(at(1), long, fenceCard{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(at(4), long, etagstore.ETagAny); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a/2", "b/2", "c/2", long} {
		if _, err := s.Create(at(3), key, fenceCard{}); !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("stale Create of %.10q = %v, want ErrFenced", key, err)
		}
	}
	var listed, paged []string
	for d, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, d.Key)
	}
	token := ""
	for range 20 {
		p, err := s.Page(ctx, "", 1, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Docs {
			paged = append(paged, d.Key)
		}
		if token = p.Next; token == "" {
			break
		}
	}
	if !slices.Equal(listed, want) || !slices.Equal(paged, want) {
		t.Errorf("List = %q, Page by one = %q; want %q", listed, paged, want)
	}
	for _, prefix := range []string{"b/", "b/2", "b/\uFFFF"} {
		var got []string
		for d, err := range s.List(ctx, prefix) {
			if err != nil {
				t.Fatalf("List(%q): %v", prefix, err)
			}
			got = append(got, d.Key)
		}
		if prefix == "b/" && !slices.Equal(got, []string{"b/1", "b/3"}) || prefix != "b/" && len(got) != 0 {
			t.Errorf("List(%q) = %q", prefix, got)
		}
	}
}

// splitCard has a field split across properties.
type splitCard struct {
	Title string
	Body  string `table:"split"`
}

// storedParts is the names of the properties of entity (p, key) that are
// parts of field (F‿k).
func storedParts(t *testing.T, client *aztables.Client, key, field string) []string {
	t.Helper()
	resp, err := client.GetEntity(t.Context(), "p", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(resp.Value, &got); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for name := range got {
		if strings.HasPrefix(name, field+"‿") && !strings.HasSuffix(name, "@odata.type") {
			parts = append(parts, name)
		}
	}
	slices.Sort(parts)
	return parts
}

// TestStalePartsAfterUpsertMerge: the stale parts a shrinking UpsertMerge
// leaves are never read, through writes that read first (to which they
// are properties T does not write), and a whole write (Upsert) removes
// them, as UpsertMerge's doc says.
func TestStalePartsAfterUpsertMerge(t *testing.T) {
	ctx := t.Context()
	_, client := hookableTable(t)
	s := tablestore.NewStore[splitCard](client, &tablestore.Options{Partition: "p"}, nil)
	big := strings.Repeat("b", 3*tablestore.MaxPropertySize/2)
	for _, tc := range []struct {
		name  string
		write func(key string) error
	}{
		{"Update", func(key string) error {
			_, err := s.Update(ctx, key, func(v *splitCard) error { v.Title = "u"; return nil })
			return err
		}},
		{"Merge", func(key string) error {
			d, err := s.Get(ctx, key)
			if err != nil {
				return err
			}
			d.Value.Title = "m"
			_, err = tablestore.Merge(ctx, s, d)
			return err
		}},
		{"Replace of a read Doc", func(key string) error {
			d, err := s.Get(ctx, key)
			if err != nil {
				return err
			}
			d.Value.Title = "r"
			_, err = s.Replace(ctx, d)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-")
			if _, err := s.Create(ctx, key, splitCard{Title: "t", Body: big}); err != nil {
				t.Fatal(err)
			}
			if _, err := tablestore.UpsertMerge(ctx, s, key, splitCard{Title: "t", Body: "short"}); err != nil {
				t.Fatal(err)
			}
			if parts := storedParts(t, client, key, "Body"); len(parts) == 0 {
				t.Fatalf("the shrinking UpsertMerge left no stale part (documented to leave them)")
			}
			if err := tc.write(key); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got, err := s.Get(ctx, key); err != nil || got.Value.Body != "short" {
				t.Errorf("Get after %s: %q, %v", tc.name, got.Value.Body, err)
			}
			if _, err := s.Upsert(ctx, key, splitCard{Title: "w", Body: "short"}); err != nil {
				t.Fatal(err)
			}
			if parts := storedParts(t, client, key, "Body"); len(parts) > 0 {
				t.Errorf("after a whole write (Upsert), the entity still holds the stale parts %q", parts)
			}
		})
	}
}

// TestFencedBatchTombstones: a fenced Batch of 50 deletes carries 50
// records, 100 actions: it fits, and each key then refuses a stale
// create. A fenced Batch holding a stale Create of a buried key beside a
// Delete is refused with ErrFenced, and the Delete is not applied.
func TestFencedBatchTombstones(t *testing.T) {
	ctx := t.Context()
	_, client := hookableTable(t)
	s := tablestore.NewStore[fenceCard](client, &tablestore.Options{Partition: "p"}, nil)
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	batch := tablestore.NewBatch(s)
	for i := range 50 {
		key := "d" + strings.Repeat("x", i)
		if _, err := s.Create(ctx, key, fenceCard{}); err != nil {
			t.Fatal(err)
		}
		batch.Delete(key, etagstore.ETagAny)
	}
	if _, err := batch.Submit(at(5)); err != nil {
		t.Fatalf("a fenced batch of 50 deletes (100 actions with their records): %v", err)
	}
	if _, err := s.Create(at(4), "dxx", fenceCard{}); !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("stale Create after the fenced batch = %v, want ErrFenced", err)
	}
	if _, err := s.Create(ctx, "live", fenceCard{Title: "live"}); err != nil {
		t.Fatal(err)
	}
	_, err := tablestore.NewBatch(s).Delete("live", etagstore.ETagAny).Create("d", fenceCard{Title: "stale"}).Submit(at(4))
	if !errors.Is(err, etagstore.ErrFenced) {
		t.Errorf("fenced batch with a stale Create of a buried key = %v, want ErrFenced", err)
	}
	if _, err := s.Get(ctx, "live"); err != nil {
		t.Errorf("the refused batch's Delete was applied: %v", err)
	}
	if _, err := s.Get(ctx, "d"); !errors.Is(err, etagstore.ErrNotFound) {
		t.Errorf("the refused batch's Create was applied: %v", err)
	}
}

// TestFenceRecordKeyLengths: row keys around the length at which
// the record's row is hashed (its prefix takes 3 UTF-16 units), in
// characters of one and of two units: a fenced Delete keeps the token and
// a stale create is refused, whatever the length.
func TestFenceRecordKeyLengths(t *testing.T) {
	ctx := t.Context()
	_, client := hookableTable(t)
	s := tablestore.NewStore[fenceCard](client, &tablestore.Options{Partition: "p"}, nil)
	at := func(token int64) context.Context { return etagstore.WithFence(ctx, token) }
	var keys []string
	for _, n := range []int{508, 509, 510, 512} {
		keys = append(keys, strings.Repeat("k", n))
	}
	for _, n := range []int{254, 255, 256} { // U+1F600: two units each
		keys = append(keys, strings.Repeat("\U0001F600", n), "a"+strings.Repeat("\U0001F600", n-1))
	}
	for _, key := range keys {
		if _, err := s.Create(at(3), key, fenceCard{}); err != nil {
			t.Errorf("Create of a %d-rune key: %v", len([]rune(key)), err)
			continue
		}
		if err := s.Delete(at(4), key, etagstore.ETagAny); err != nil {
			t.Errorf("fenced Delete of a %d-rune key: %v", len([]rune(key)), err)
			continue
		}
		if _, err := s.Create(at(3), key, fenceCard{}); !errors.Is(err, etagstore.ErrFenced) {
			t.Errorf("stale Create of a %d-rune key = %v, want ErrFenced", len([]rune(key)), err)
		}
		if _, err := s.Create(at(4), key, fenceCard{}); err != nil {
			t.Errorf("Create with the kept token of a %d-rune key: %v", len([]rune(key)), err)
		}
	}
}

// failRecordRead fails the first n GETs of a fence record with a
// transport error, sending nothing.
type failRecordRead struct{ n atomic.Int32 }

func (p *failRecordRead) Do(req *policy.Request) (*http.Response, error) {
	u := req.Raw().URL
	if req.Raw().Method == http.MethodGet && (strings.Contains(u.EscapedPath(), "%EF%BF%BF") || strings.Contains(u.Path, "\uFFFF")) && p.n.Add(-1) >= 0 {
		return nil, errors.New("injected: connection reset before the request was sent")
	}
	return req.Next()
}

// TestFailedRecordReadIsNotUnknown: a fenced Create reads the key's fence
// record before it sends its transaction. When that read fails (a
// transport error: nothing reaches the service), the create is not
// reported as of unknown outcome: nothing was sent.
func TestFailedRecordReadIsNotUnknown(t *testing.T) {
	ctx := t.Context()
	name, _ := hookableTable(t)
	fail := &failRecordRead{}
	fail.n.Store(1)
	s := tablestore.NewStore[fenceCard](hookedTable(t, name, fail), &tablestore.Options{Partition: "p"}, nil)
	for _, op := range []string{"Create", "Update(CreateIfMissing)"} {
		fail.n.Store(1)
		key := strings.ReplaceAll(op, "(", "-")
		key = strings.ReplaceAll(key, ")", "")
		var err error
		if op == "Create" {
			_, err = s.Create(etagstore.WithFence(ctx, 3), key, fenceCard{Title: "mine"})
		} else {
			_, err = s.Update(etagstore.WithFence(ctx, 3), key, func(c *fenceCard) error { c.Title = "mine"; return nil }, etagstore.CreateIfMissing())
		}
		_, gerr := s.Get(ctx, key)
		t.Logf("fenced %s with its record read failing: %v (then Get: %v)", op, err, gerr)
		if errors.Is(err, etagstore.ErrOutcomeUnknown) {
			t.Errorf("fenced %s whose record read failed before anything was written = %v; want a definite answer", op, err)
		}
	}
}
