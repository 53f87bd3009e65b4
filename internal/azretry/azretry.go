// Package azretry turns off the Azure SDK pipeline's own retries for one
// call. A conditional write retried blindly by the pipeline after its
// response was lost gets 412 (or 409, 404) from its own success, which
// reads as a conflict. The backends send their writes and deletes with
// NoRetry, so that a lost response reaches the Store as a transport error,
// which the Store resolves by reading before it retries.
package azretry

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// NoRetry returns a context whose SDK calls make exactly one try.
func NoRetry(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
}
