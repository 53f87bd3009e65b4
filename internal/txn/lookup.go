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
// whether it answered one: the slots run again without it.
func (b *batch) refuseTaken(st *State) bool {
	read := st.lead.Abilities().ReadMany
	if read == nil {
		return false
	}
	var keys []string
	for _, tc := range st.order {
		if _, unread := tc.view.unreadCreate(tc.key); unread && !tc.view.writes[tc.key].fresh && !b.knows(tc.key) {
			keys = append(keys, tc.key)
		}
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
	refused := false
	mu.Lock()
	defer mu.Unlock()
	for _, r := range b.applied {
		if r.Status != groupcommit.Applied {
			continue
		}
		for _, key := range r.view.own.keys {
			if _, unread := r.view.views[r.view.owner[key]].unreadCreate(key); unread && r.view.own.written[key] && !r.view.own.inherited[key] && b.exists[key] {
				b.hand(r, result{exists: key, tries: st.attempt, ran: r.runs})
				refused = true
				break
			}
		}
	}
	return refused
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
