package txn

import (
	"context"
	"sync"

	"github.com/etagstore/etagstore/driver"
	"github.com/etagstore/etagstore/internal/groupcommit"
)

// What a batch of transactions reads before its commit, in one go: the
// keys its members create unread (are they taken?), and, after a lost
// race, the keys the last attempt touched.

// refuseTaken looks up, in one request where the backend can, the keys
// the adopted members create unread, and answers each member whose key
// exists (ErrExists, once its reads are found current). It reports
// whether it answered one: the slots run again without it. A member
// whose key the batch already found existing is answered before any
// read, so that the keys of a member about to leave are not looked up.
func (b *batch) refuseTaken(st *State) bool {
	read := st.lead.Abilities().ReadMany
	if read == nil {
		return false
	}
	if b.refuseKnown(st) {
		return true // the slots run again without them; the others' keys are looked up then
	}
	var keys []string
	var likely map[string]bool
	for _, tc := range st.order {
		switch _, unread := tc.view.unreadCreate(tc.key); {
		case !unread || tc.view.writes[tc.key].fresh || b.knows(tc.key):
		case b.isWary():
			keys = append(keys, tc.key)
		case tc.view.s.Holds(tc.key):
			if likely == nil {
				likely = map[string]bool{}
			}
			likely[tc.key] = true
		}
	}
	if len(likely) > 0 {
		answered, look := b.answerLikely(likely, read)
		if answered {
			return true
		}
		keys = append(keys, look...)
	}
	if len(keys) > 0 {
		items, err := read(st.ctx, keys)
		if err != nil {
			return false // the commit will tell
		}
		if b.exists == nil {
			b.exists = map[string]bool{}
		}
		for i, it := range items {
			b.exists[keys[i]] = it.ETag != ""
		}
	}
	return b.refuseKnown(st)
}

// refuseKnown answers each adopted member that creates unread a key the
// batch found existing (ErrExists, once its reads are found current),
// and reports whether it answered one.
func (b *batch) refuseKnown(st *State) bool {
	refused := false
	mu.Lock()
	defer mu.Unlock()
	for _, r := range b.applied {
		if r.Status != groupcommit.Applied {
			continue
		}
		if key := r.created(func(key string) bool { return b.exists[key] }); key != "" {
			b.hand(r, result{exists: key, tries: st.attempt, ran: r.runs})
			refused = true
		}
	}
	return refused
}

// created is the first key r's fn created unread itself (not inherited
// from an earlier member) for which match holds ("" when none).
func (r *member) created(match func(key string) bool) string {
	v := r.view
	for _, key := range v.own.keys {
		if _, unread := v.views[v.owner[key]].unreadCreate(key); unread && v.own.written[key] && !v.own.inherited[key] && match(key) {
			return key
		}
	}
	return ""
}

// isWary reports whether the batch looks up every key created unread:
// the group's prediction, asked once, at the batch's first such key.
func (b *batch) isWary() bool {
	if !b.predicted {
		mu.Lock()
		b.predicted, b.wary = true, b.g.wary()
		mu.Unlock()
	}
	return b.wary
}

// answerLikely answers each adopted member that creates unread a key of
// likely (keys its Store's version cache holds: most likely taken): its
// caller reads the key, with the other such members' keys through read
// (probe.go), beside the batch's commit rather than before it, and fails
// with ErrExists (once its reads are found current) or, the cache wrong,
// runs its transaction on its own. It reports whether it
// answered one (the slots run again without them), and the keys of the
// members it could not answer so, having no attempt left for a run on
// their own: those are looked up.
func (b *batch) answerLikely(likely map[string]bool, read func(context.Context, []string) ([]driver.Item, error)) (answered bool, look []string) {
	mu.Lock()
	defer mu.Unlock()
	var probing []*member
	var keys []string
	var cores []Store
	for _, r := range b.applied {
		if r.Status != groupcommit.Applied {
			continue
		}
		if !r.spentRuns() {
			if key := r.created(func(key string) bool { return likely[key] }); key != "" {
				probing, keys, cores = append(probing, r), append(keys, key), append(cores, r.owner(key))
			}
			continue
		}
		for _, key := range r.view.own.keys {
			if likely[key] {
				look = append(look, key)
			}
		}
	}
	shared := newProbes(keys, cores, read)
	for i, r := range probing {
		b.hand(r, result{likely: keys[i], probes: shared, ran: r.runs})
	}
	return len(probing) > 0, look
}

// spentRuns reports whether r's runs in batches have used up its lead's
// MaxAttempts: it has no attempt left for a run on its own (mu held).
func (r *member) spentRuns() bool {
	max := r.call.lead.Env().Policy.MaxAttempts
	return max > 0 && r.runs >= max
}

// A group's prediction of the keys its members create unread, and of the
// unique values they take. A batch looks up no key its Stores' version
// caches hold (answerLikely): a key a process created is most likely
// still there, and one it never met most likely missing, which the
// commit's condition then confirms at no cost. Likewise a unique value
// whose entry the Store wrote lately is most likely held, and its member
// learns on its own (index.Set.Pending, deferTakers). A commit refused
// because such a key existed or such a value was held (another process
// made it) makes the group wary: its next batches that create keys or
// take values look up every such key, and read every value, before they
// send: 3 batches, then 7, 15… up to 127 as such surprises recur, so that
// one taken key does not cost the others a commit each time. 64 batches
// in a row that look up nothing and meet no such refusal start the count
// again. The runner's, under mu; kept between a scope's groups
// (remember, recall).
type prediction struct {
	waryFor   int // batches still to look every key up
	surprises int // since the last clean stretch: a wary spell is 2^(surprises+1) - 1 batches
	clean     int // batches since the last surprise, out of wary spells
}

// predictions are the predictions of commit scopes with no group now, by
// scope, kept while they differ from a new one's (guarded by mu). At most
// maxPredictions are kept: forgetting one costs a surprise at most.
var predictions = map[any]prediction{}

const maxPredictions = 1024

// recall is the prediction kept for key's scope, forgotten there (mu held).
func recall(key any) prediction {
	p := predictions[key]
	delete(predictions, key)
	return p
}

// remember keeps p for key's scope until its next group (mu held).
func remember(key any, p prediction) {
	if p == (prediction{}) {
		return
	}
	if len(predictions) >= maxPredictions {
		clear(predictions)
	}
	predictions[key] = p
}

// wary reports whether the group's next batch that creates keys unread
// looks up every one, and counts the batch.
func (p *prediction) wary() bool {
	if p.waryFor > 0 {
		p.waryFor--
		return true
	}
	if p.clean++; p.clean >= 64 {
		p.surprises = 0
	}
	return false
}

// surprised tells p of a batch's end: yes when its commit was refused
// because a key created unread, which it did not look up, exists.
func (p *prediction) surprised(yes bool) {
	if !yes {
		return
	}
	p.clean, p.surprises = 0, min(p.surprises+1, 6)
	p.waryFor = 1<<(p.surprises+1) - 1
}

// knows reports whether the batch looked key up already.
func (b *batch) knows(key string) bool {
	_, ok := b.exists[key]
	return ok
}

// readFirstKeys reads together (ReadMany: one request per partition and
// 14 keys on tables, in parallel) the keys the members' fns first used
// that their Stores' version caches do not hold, so that the batch does
// not wait on its members' first reads one after another: each fn finds
// its first key read, and a key it creates is known taken or not before
// the commit. The read waits at most readAllowance (a read
// that hangs is left to the fns, as a slot's is); a failed one is left to
// them too.
func (b *batch) readFirstKeys(st *State) map[string]Version {
	read := st.lead.Abilities().ReadMany
	if read == nil {
		return nil
	}
	var keys []string
	var cores []Store
	seen := map[string]bool{}
	for _, r := range b.members {
		c, key := r.firstCore, r.firstKey
		if c == nil || key == "" || seen[key] || c.CheckKey(key) != nil || c.Holds(key) {
			continue
		}
		seen[key] = true
		keys, cores = append(keys, key), append(cores, c)
	}
	if len(keys) < 2 {
		return nil // one key: its fn reads it as soon
	}
	ctx, cancel := context.WithTimeout(st.ctx, readAllowance)
	defer cancel()
	items, err := read(ctx, keys)
	if err != nil {
		return nil
	}
	ahead := make(map[string]Version, len(keys))
	if b.exists == nil {
		b.exists = map[string]bool{}
	}
	for i, it := range items {
		var err error
		if it.ETag == "" {
			err = driver.Errorf(driver.ErrNotFound, "%q", keys[i])
		}
		ahead[keys[i]] = cores[i].Noted(keys[i], it, err)
		b.exists[keys[i]] = err == nil
	}
	return ahead
}

// readAhead reads, in parallel, the keys the batch's last attempt
// touched: the next attempt's fns find them read. A read that fails is
// left to the fn that reads the key.
func (b *batch) readAhead(ctx context.Context, lead Store) map[string]Version {
	if len(b.keys) == 0 {
		return nil
	}
	owners := map[string]Store{}
	if b.applied != nil {
		for _, r := range b.applied {
			for k, c := range r.view.owner {
				owners[k] = c
			}
		}
	}
	vs := make([]Version, len(b.keys))
	ok := make([]bool, len(b.keys))
	var wg sync.WaitGroup
	for i, key := range b.keys {
		c := owners[key]
		if c == nil {
			c = lead
		}
		wg.Go(func() {
			v, err := c.Read(ctx, key)
			vs[i], ok[i] = v, err == nil
		})
	}
	wg.Wait()
	ahead := make(map[string]Version, len(b.keys))
	for i, key := range b.keys {
		if ok[i] {
			ahead[key] = vs[i]
		}
	}
	return ahead
}
