package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/runtime/store"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// blobEncoding marks a payload the history holds by reference: its data is the
// key of the blob that holds the payload.
const blobEncoding = "agentrun/blob"

// Codec keeps payloads larger than Limit — a long tool output, a model request
// with a long conversation — in a store (store.Blobs), the history holding
// only their key: histories stay small however much a run reads. Keys are the
// payloads' SHA-256, so a payload sent twice (the same conversation in the next
// model request) is stored once. Every worker and client of a task queue must
// use the same store.
type Codec struct {
	Blobs store.Blobs
	// Limit is the largest payload kept inline, in bytes (DefaultInlineLimit).
	Limit int
	// TTL is how long a blob is kept (DefaultBlobTTL): longer than a run, its
	// approvals included, and the namespace's history retention.
	TTL time.Duration
}

// Defaults of a Codec.
const (
	DefaultInlineLimit = 64 << 10
	DefaultBlobTTL     = 30 * 24 * time.Hour
)

// blobTimeout bounds one blob read or write: the codec's interface has no context.
const blobTimeout = 30 * time.Second

var _ converter.PayloadCodec = (*Codec)(nil)

// DataConverter is Temporal's default data converter with the codec.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	limit := c.Limit
	if limit <= 0 {
		limit = DefaultInlineLimit
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = DefaultBlobTTL
	}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if proto.Size(p) <= limit {
			out[i] = p
			continue
		}
		data, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		key := "temporal/payload/" + hex.EncodeToString(sum[:])
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		err = c.Blobs.PutBlob(ctx, key, data, ttl)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("keeping a payload of %d bytes in the store: %w", len(data), err)
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(blobEncoding)}, Data: []byte(key)}
	}
	return out, nil
}

func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != blobEncoding {
			out[i] = p
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		data, err := c.Blobs.Blob(ctx, string(p.Data))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reading the payload %s from the store: %w", p.Data, err)
		}
		if sum := sha256.Sum256(data); "temporal/payload/"+hex.EncodeToString(sum[:]) != string(p.Data) {
			return nil, fmt.Errorf("the payload %s in the store is not the one the history refers to", p.Data)
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(data, &orig); err != nil {
			return nil, fmt.Errorf("the payload %s: %w", p.Data, err)
		}
		out[i] = &orig
	}
	return out, nil
}
