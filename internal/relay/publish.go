package relay

import (
	"context"
	"fmt"
	"strings"
)

// This file is how a relay pass moves through one partition's run of
// events: calls of the publisher handed out in order, a batch each and
// a window of them at a time.

// Publisher is a relay's publisher: Publish takes up to Size consecutive
// events of one partition at a time (Relay's: one, by Singly).
type Publisher[V any] struct {
	Publish func(context.Context, []V) error
	Size    int
}

// Singly is publish as a publisher of batches of one.
func Singly[V any](publish func(context.Context, V) error) Publisher[V] {
	return Publisher[V]{func(ctx context.Context, evs []V) error { return publish(ctx, evs[0]) }, 1}
}

// inOrder publishes evs in order, a batch of up to p.Size at a call, and
// inFlight calls at once at most: the calls are handed out in order
// (with more than one in flight, their goroutines may enter publish in
// any order), and one more is handed out as one in flight lands. progress(k) is
// called each time the first k events have all landed (k grows); when
// it returns false, or a call fails, no more start. It returns how many
// events, from the first, landed before the first call that failed, and
// that call's error. With inFlight 1 every call runs on the caller's
// goroutine, one after another.
func (p Publisher[V]) inOrder(ctx context.Context, evs []V, inFlight int, progress func(k int) bool) (int, error) {
	var units [][]V
	for rest := evs; len(rest) > 0; {
		n := min(len(rest), p.Size)
		units = append(units, rest[:n:n]) // full: a publisher that appends to its batch copies it
		rest = rest[n:]
	}
	ends := make([]int, len(units)+1) // ends[k]: the events of units[:k]
	for i, u := range units {
		ends[i+1] = ends[i] + len(u)
	}
	k, err := p.unitsInOrder(ctx, units, inFlight, func(k int) bool { return progress(ends[k]) })
	return ends[k], err
}

func (p Publisher[V]) unitsInOrder(ctx context.Context, units [][]V, inFlight int, progress func(k int) bool) (int, error) {
	if inFlight <= 1 {
		for i, u := range units {
			if err := p.call(ctx, u); err != nil {
				return i, err
			}
			if !progress(i + 1) {
				return i + 1, nil
			}
		}
		return len(units), nil
	}
	return p.window(ctx, units, inFlight, progress)
}

// window is unitsInOrder with more than one call in flight: a window of
// inFlight calls that slides past each one that lands.
func (p Publisher[V]) window(ctx context.Context, units [][]V, inFlight int, progress func(k int) bool) (int, error) {
	type result struct {
		i   int
		err error
	}
	results := make(chan result, inFlight)
	landed := make([]bool, len(units))
	next, prefix, running, stop := 0, 0, 0, false
	failAt, failErr := len(units), error(nil)
	for {
		for ; !stop && running < inFlight && next < len(units); next, running = next+1, running+1 {
			go func(i int) { results <- result{i, p.call(ctx, units[i])} }(next)
		}
		if running == 0 {
			return prefix, failErr
		}
		r := <-results
		running--
		if r.err != nil {
			stop = true
			if r.i < failAt {
				failAt, failErr = r.i, r.err
			}
			continue
		}
		landed[r.i] = true
		was := prefix
		for prefix < failAt && landed[prefix] {
			prefix++
		}
		if prefix > was && !stop && !progress(prefix) {
			stop = true
		}
	}
}

// call is p.Publish(ctx, evs); a panic in it is its error.
func (p Publisher[V]) call(ctx context.Context, evs []V) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("publish panicked: %s", strings.Join(strings.Fields(fmt.Sprint(r)), " ")) // one line
		}
	}()
	return p.Publish(ctx, evs)
}
