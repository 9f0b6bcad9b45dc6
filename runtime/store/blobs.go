package store

import (
	"context"
	"errors"
	"time"
)

// Blobs keeps large values for a while by key: what a durable engine's history
// holds by reference rather than inline. The memory stores implement it.
type Blobs interface {
	// PutBlob stores data under key; it expires after ttl (0: never). Writing a
	// key again replaces its value and its expiry.
	PutBlob(ctx context.Context, key string, data []byte, ttl time.Duration) error
	// Blob returns the data stored under key; ErrBlobNotFound if there is none or
	// it expired.
	Blob(ctx context.Context, key string) ([]byte, error)
}

// ErrBlobNotFound is a blob that is not stored, or no longer.
var ErrBlobNotFound = errors.New("no such blob")
