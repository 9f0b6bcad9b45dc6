package words

import "testing"

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"cancel", "cancel", 0},
		{"cancle", "cancel", 1}, // neighbours swapped
		{"refnd", "refund", 1},
		{"membrship", "membership", 1},
		{"stop", "tops", 2},
		{"配送费", "配送", 1},
		{"", "abc", 3},
	} {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
