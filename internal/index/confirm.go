package index

import "context"

// This file settles predictions: the values a request's writes take that
// Pending found most likely held, reading nothing (Likely). Their writers
// leave a batch on the prediction; Confirm then reads what it left
// unread, for all of them together, beside the batch's commit.

// Confirm reads, together (precheck: one ReadMany of the entries and of
// the documents they most likely name, and another of any other
// document they name), the values es take: predictions of one
// request's Pending (Likely). For each it returns the definite error,
// naming the document, when another document holds the value now, and
// nil when the value is free (no entry, or a stale one). A failed read
// is returned as the read's error.
func Confirm(ctx context.Context, es []*UniqueError) ([]*UniqueError, error) {
	if len(es) == 0 {
		return nil, nil
	}
	plan := make([]*planned, len(es))
	for i, e := range es {
		plan[i] = e.plan
	}
	_, held, err := es[0].x.precheck(ctx, plan, nil, false)
	if err != nil {
		return nil, err
	}
	out := make([]*UniqueError, len(es))
	for i, e := range es {
		for _, h := range held {
			if h.Index == e.Index && h.Value == e.Value && h.By == e.By {
				out[i] = h
			}
		}
	}
	return out, nil
}
