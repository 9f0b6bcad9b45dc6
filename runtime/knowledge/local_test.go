package knowledge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func embedOne(t testing.TB, e Embedder, text string) []float32 {
	t.Helper()
	vs, err := e.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	return vs[0]
}

func TestLocalDeterministic(t *testing.T) {
	texts := []string{"How do I track my order?", "怎么查询我的订单物流？", "order 订单 123"}
	a, err := (&Local{}).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewLocal(DefaultLocalDimensions)
	b, err := other.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if !slices.Equal(a[i], b[i]) {
			t.Errorf("%q: two embeddings differ", texts[i])
		}
	}
	// Bit for bit, run after run: a long text has many features colliding in one
	// dimension, where a varying summation order would show in the last bit.
	var words []string
	for i := range 3000 {
		words = append(words, fmt.Sprintf("word%dx 词%d", i, i))
	}
	long := strings.Join(words, " ")
	first, _ := (&Local{}).Embed(context.Background(), []string{long})
	for range 50 {
		again, _ := (&Local{}).Embed(context.Background(), []string{long})
		if !slices.Equal(first[0], again[0]) {
			t.Fatal("the same long text embeds differently from run to run")
		}
	}
}

func TestLocalUnitLength(t *testing.T) {
	tests := []struct{ name, text string }{
		{"english", "How do I track my order?"},
		{"chinese", "怎么查询我的订单物流？"},
		{"mixed", "iPhone 订单 cancel 了吗"},
		{"one word", "refund"},
		{"one character", "退"},
		{"repeated", "refund refund refund refund"},
		{"long", "Our delivery partners deliver every day of the week, including weekends; " +
			"orders placed before noon arrive the same day. 我们每天都配送，包括周末。"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := embedOne(t, &Local{}, tt.text)
			if n := math.Sqrt(float64(Dot(v, v))); math.Abs(n-1) > 1e-5 {
				t.Errorf("L2 norm %v, want 1", n)
			}
		})
	}
}

func TestLocalEmptyText(t *testing.T) {
	for _, text := range []string{"", "   ", "？！…", "!!! ---"} {
		v := embedOne(t, &Local{}, text)
		if len(v) != DefaultLocalDimensions {
			t.Fatalf("%q: length %d, want %d", text, len(v), DefaultLocalDimensions)
		}
		for _, x := range v {
			if x != 0 {
				t.Fatalf("%q: want the zero vector, got a component %v", text, x)
			}
		}
	}
}

func TestLocalDimensionsAndID(t *testing.T) {
	tests := []struct {
		name   string
		local  *Local
		dims   int
		wantID string
	}{
		{"zero value", &Local{}, DefaultLocalDimensions, "local:v1:dim=256"},
		{"1024", mustLocal(t, 1024), 1024, "local:v1:dim=1024"},
		{"not a power of two", mustLocal(t, 300), 300, "local:v1:dim=300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.local.Dimensions(); got != tt.dims {
				t.Errorf("Dimensions() = %d, want %d", got, tt.dims)
			}
			if got := tt.local.ID(); got != tt.wantID {
				t.Errorf("ID() = %q, want %q", got, tt.wantID)
			}
			if got := len(embedOne(t, tt.local, "where is my order 我的订单")); got != tt.dims {
				t.Errorf("vector length %d, want %d", got, tt.dims)
			}
		})
	}
	if _, err := NewLocal(8); err == nil {
		t.Error("NewLocal(8): want an error")
	}
}

func mustLocal(t *testing.T, dims int) *Local {
	t.Helper()
	l, err := NewLocal(dims)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLocalNormalisation(t *testing.T) {
	tests := []struct{ name, a, b string }{
		{"case and punctuation", "Where is my ORDER?!", "where is my order"},
		{"full-width (NFKC)", "ｏｒｄｅｒ １２３", "order 123"},
		{"apostrophe", "I don't want it", "I dont want it"},
		{"chinese punctuation", "怎么取消订单？？", "怎么取消订单"},
		{"spaces inside chinese", "取消 订单", "取消订单"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := embedOne(t, &Local{}, tt.a), embedOne(t, &Local{}, tt.b)
			if s := Dot(a, b); s < 0.999 {
				t.Errorf("similarity %.4f, want 1", s)
			}
		})
	}
}

func TestLocalRanksRelatedAboveUnrelated(t *testing.T) {
	tests := []struct{ name, query, related, unrelated string }{
		{"english", "How do I track my order?", "how can I track my order", "how do I reset my password"},
		{"english typo", "How do I delete my account?", "how do i delete my acount", "how do I delete my order history"},
		{"chinese", "如何取消订单？", "订单怎么取消", "如何修改收货地址"},
		{"chinese colloquial", "忘记密码怎么办？", "我忘记密码了怎么办", "忘记账号怎么办"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := embedOne(t, &Local{}, tt.query)
			rel := Dot(q, embedOne(t, &Local{}, tt.related))
			unrel := Dot(q, embedOne(t, &Local{}, tt.unrelated))
			if rel <= unrel {
				t.Errorf("related %.3f <= unrelated %.3f", rel, unrel)
			}
		})
	}
}

func TestLocalCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&Local{}).Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestDot(t *testing.T) {
	a := []float32{1, 2, 3, 4, 5, 6, 7}
	b := []float32{7, 6, 5, 4, 3, 2, 1}
	if got := Dot(a, b); got != 84 {
		t.Errorf("Dot = %v, want 84", got)
	}
}
