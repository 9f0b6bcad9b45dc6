package httpcap

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestBody(t *testing.T) {
	for _, tt := range []struct {
		size    int
		wantErr bool
	}{{0, false}, {9, false}, {10, false}, {11, true}, {1000, true}} {
		b := &body{ReadCloser: io.NopCloser(bytes.NewReader(make([]byte, tt.size))), limit: 10, left: 10}
		got, err := io.ReadAll(b)
		if tt.wantErr != (err != nil) || len(got) != min(tt.size, 10) || err != nil && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%d bytes: read %d, error %v", tt.size, len(got), err)
		}
	}
}
