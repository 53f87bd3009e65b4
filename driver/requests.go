package driver

import "context"

// RequestCounter is told of every storage request a backend sends for the
// operation whose context carries it (see CountRequests).
type RequestCounter interface {
	// Sent counts one request, which ended with err: nil, or the error the
	// backend made of the service's answer (a sentinel's match says what
	// it was).
	Sent(ctx context.Context, err error)
}

type requestCounterKey struct{}

// CountRequests returns a context whose storage requests are counted by c.
// A Store's telemetry installs one per operation, so that
// etagstore.requests names the operation a request was sent for.
func CountRequests(ctx context.Context, c RequestCounter) context.Context {
	return context.WithValue(ctx, requestCounterKey{}, c)
}

// Sent reports one storage request sent under ctx, which ended with err,
// to the ctx's RequestCounter (if any), and returns err. A backend calls
// it once for every request it sends to its service (each page of a
// listing, each conditional read, each transaction), after turning the
// answer into its error, so that
//
//	if err := driver.Sent(ctx, mapError("read", key, err)); err != nil {
//
// counts and checks in one line. A request the service's SDK retries on
// its own, below the backend, counts once.
func Sent(ctx context.Context, err error) error {
	if c, ok := ctx.Value(requestCounterKey{}).(RequestCounter); ok {
		c.Sent(ctx, err)
	}
	return err
}
