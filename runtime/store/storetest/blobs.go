package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/store"
)

// implementing is the store as T, one of the interfaces besides store.Store that the
// suite tests (PausedRuns, Blobs), or fails the test when the store lacks it.
func implementing[T any](t testing.TB, s store.Store) T {
	t.Helper()
	v, ok := s.(T)
	if !ok {
		t.Fatalf("%T does not implement %v", s, reflect.TypeFor[T]())
	}
	return v
}

func putBlob(t testing.TB, b store.Blobs, key string, data []byte, ttl time.Duration) {
	t.Helper()
	if err := b.PutBlob(ctx, key, data, ttl); err != nil {
		t.Fatalf("put blob %q: %v", key, err)
	}
}

// checkBlob fails unless key holds want; it says which byte differs rather than
// printing a megabyte.
func checkBlob(t testing.TB, b store.Blobs, key string, want []byte) {
	t.Helper()
	got, err := b.Blob(ctx, key)
	if err != nil {
		t.Errorf("blob %q: %v", key, err)
		return
	}
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	t.Errorf("blob %q: %d bytes, want %d; they differ from byte %d on", key, len(got), len(want), i)
}

func checkNoBlob(t testing.TB, b store.Blobs, key string) {
	t.Helper()
	if got, err := b.Blob(ctx, key); !errors.Is(err, store.ErrBlobNotFound) {
		t.Errorf("blob %q: %d bytes, %v; want ErrBlobNotFound", key, len(got), err)
	}
}

// Binary values come back byte for byte — every byte value, invalid UTF-8, nothing,
// a megabyte — under keys that a store must not confuse with one another or with its
// own keys; writing again replaces the value.
func testBlobsRoundTrip(t *testing.T, s store.Store) {
	b := implementing[store.Blobs](t, s)
	checkNoBlob(t, b, "missing")
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	mib := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(mib)
	values := map[string][]byte{
		"every-byte":                      every,
		"invalid-utf8":                    []byte("\xff\xfe\xc3\x28 \xed\xa0\x80 \x80"),
		"nul":                             {0},
		"empty":                           {},
		"mib":                             mib,
		"text":                            []byte(`{"tool":"lookup","result":"上海市"}`),
		"a:b":                             []byte("colon"),
		"a%3Ab":                           []byte("escaped colon"),
		"a%b":                             []byte("percent"),
		"conv:c1:turns":                   []byte("looks like a conversation's key"),
		"sha256/" + string(every[32:127]): []byte("a key of every printable byte"),
		"键":                               []byte("unicode key"),
	}
	for key, v := range values {
		putBlob(t, b, key, v, 0)
	}
	for key, v := range values {
		checkBlob(t, b, key, v)
	}

	// Neither the caller's slice nor the one returned is the store's.
	in := []byte("original")
	putBlob(t, b, "mine", in, 0)
	copy(in, "CHANGED!")
	out, err := b.Blob(ctx, "mine")
	if err != nil {
		t.Fatal(err)
	}
	copy(out, "CHANGED!")
	checkBlob(t, b, "mine", []byte("original"))

	putBlob(t, b, "mib", every, 0)
	checkBlob(t, b, "mib", every)
	putBlob(t, b, "every-byte", mib, time.Hour)
	checkBlob(t, b, "every-byte", mib)
	putBlob(t, b, "empty", []byte("no longer"), 0)
	checkBlob(t, b, "empty", []byte("no longer"))
	checkNoBlob(t, b, "missing")
	checkNoBlob(t, b, "a:")
	checkNoBlob(t, b, "conv:c1")

	// Blobs are apart from conversations: committing and forgetting leave them.
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, true)})
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	checkBlob(t, b, "conv:c1:turns", values["conv:c1:turns"])
}

// A blob with a ttl is there at first and gone once the ttl has passed; a blob
// without one stays; writing a key again replaces its expiry too. Stores keep expiry
// at their own resolution, so the test waits for the expiry to show, within bounds,
// instead of asserting its moment.
func testBlobsExpiry(t *testing.T, s store.Store) {
	b := implementing[store.Blobs](t, s)
	const ttl = 1500 * time.Millisecond
	start := time.Now()
	putBlob(t, b, "forever", []byte("kept"), 0)
	putBlob(t, b, "short", []byte("brief"), ttl)
	putBlob(t, b, "renewed", []byte("brief at first"), ttl)
	putBlob(t, b, "renewed", []byte("kept now"), 0)
	putBlob(t, b, "shortened", []byte("kept at first"), 0)
	putBlob(t, b, "shortened", []byte("brief now"), ttl)
	putBlob(t, b, "long", []byte("an hour"), time.Hour)
	if time.Since(start) < ttl/2 { // on a machine this slow the blobs may be gone already
		checkBlob(t, b, "short", []byte("brief"))
		checkBlob(t, b, "shortened", []byte("brief now"))
	}

	deadline := start.Add(ttl + 5*time.Second)
	for _, key := range []string{"short", "shortened"} {
		for {
			_, err := b.Blob(ctx, key)
			if errors.Is(err, store.ErrBlobNotFound) {
				break
			}
			if err != nil {
				t.Fatalf("blob %q: %v", key, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("blob %q is still there %v after it was written with ttl %v", key, time.Since(start), ttl)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if waited := time.Since(start); waited < ttl-100*time.Millisecond {
		t.Errorf("the blobs with ttl %v expired after %v", ttl, waited)
	}
	checkBlob(t, b, "forever", []byte("kept"))
	checkBlob(t, b, "renewed", []byte("kept now"))
	checkBlob(t, b, "long", []byte("an hour"))

	// An expired key can be written again, and is then new.
	putBlob(t, b, "short", []byte("again"), 0)
	checkBlob(t, b, "short", []byte("again"))
}

// Writers and readers at once: each reader sees one whole value written to the key.
func testBlobsConcurrent(t *testing.T, s store.Store) {
	b := implementing[store.Blobs](t, s)
	const n = 8
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 4096+i) }
	putBlob(t, b, "shared", value(0), 0)
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for i := range n {
		wg.Go(func() {
			for range 5 {
				if err := b.PutBlob(ctx, "shared", value(i), 0); err != nil {
					errs <- err
				}
				if err := b.PutBlob(ctx, fmt.Sprint("own-", i), value(i), time.Hour); err != nil {
					errs <- err
				}
			}
		})
		wg.Go(func() {
			for range 5 {
				got, err := b.Blob(ctx, "shared")
				if err != nil {
					errs <- err
					continue
				}
				if len(got) < 4096 || !bytes.Equal(got, value(len(got)-4096)) {
					errs <- fmt.Errorf("a torn value of %d bytes", len(got))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		checkBlob(t, b, fmt.Sprint("own-", i), value(i))
	}
}
