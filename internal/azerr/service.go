package azerr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// ServiceError is an error the storage service answered, as one line:
//
//	tablestore: read "p/k" (404 ResourceNotFound, request 709f47ea-…)
//
// The SDK's *azcore.ResponseError, with the full HTTP exchange, stays one
// errors.As away (Unwrap). It matches no sentinel itself: a backend puts
// the sentinel in front of it (see Wrap).
type ServiceError struct {
	Backend   string // "tablestore", "blobstore"
	Op        string // "read", "write", "list", "batch", …
	Key       string // "" when the operation has no one key
	Status    int
	Code      string // the service's error code ("" if none)
	RequestID string // x-ms-request-id ("" if none)
	Detail    string // what the answer means, if a backend says ("the table does not exist")
	Err       error  // the SDK's error, usually a *azcore.ResponseError
}

func (e *ServiceError) Error() string {
	var b strings.Builder
	b.WriteString(e.Backend)
	b.WriteString(": ")
	b.WriteString(e.Op)
	if e.Key != "" {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.Key))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(OneLine(e.Detail))
	}
	b.WriteString(" (")
	if e.Status != 0 {
		b.WriteString(strconv.Itoa(e.Status))
	}
	if e.Code != "" {
		if e.Status != 0 {
			b.WriteByte(' ')
		}
		b.WriteString(OneLine(e.Code))
	}
	if e.RequestID != "" {
		b.WriteString(", request ")
		b.WriteString(OneLine(e.RequestID))
	}
	b.WriteByte(')')
	return b.String()
}

func (e *ServiceError) Unwrap() error { return e.Err }

// New is the ServiceError of re, the SDK's error err (or one in its chain).
func New(backend, op, key string, re *azcore.ResponseError, err error) *ServiceError {
	se := &ServiceError{Backend: backend, Op: op, Key: key, Status: re.StatusCode, Code: re.ErrorCode, Err: err}
	if re.RawResponse != nil {
		se.RequestID = re.RawResponse.Header.Get("x-ms-request-id")
	}
	return se
}

// Wrap is the error of a service answer: sentinel (nil for none) in front
// of se, as "etagstore: not found: tablestore: read …". errors.Is matches
// the sentinel, errors.As reaches se and the SDK's error behind it.
func Wrap(sentinel error, se *ServiceError) error {
	if sentinel == nil {
		return se
	}
	return fmt.Errorf("%w: %w", sentinel, se)
}

// Plain is the error of a failure with no service answer (a network
// failure, say) as one line "backend: op "key": cause".
func Plain(backend, op, key string, err error) error {
	head := backend + ": " + op
	if key != "" {
		head += " " + strconv.Quote(key)
	}
	return &lineError{msg: head + ": " + OneLine(err.Error()), err: err}
}

// lineError prints msg and unwraps to err.
type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }
func (e *lineError) Unwrap() error { return e.err }

// OneLine is s with its line breaks and the runs of blanks around them
// turned into "; ", so that an error prints as one line.
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var parts []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// ResponseError is the *azcore.ResponseError in err's chain, or nil.
func ResponseError(err error) *azcore.ResponseError {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re
	}
	return nil
}
