package main

import "testing"

// A cheap call's cost once printed as $8.1e-05.
func TestExecFormatCostHasNoExponent(t *testing.T) {
	for _, tt := range []struct {
		usd  float64
		want string
	}{
		{0, "$0"},
		{0.000081, "$0.000081"},
		{0.00008123456, "$0.00008123"},
		{0.001234, "$0.001234"},
		{0.05, "$0.05"},
		{1.234, "$1.234"},
		{1.2, "$1.2"},
		{1234.6, "$1235"},
		{9.99996, "$10"},
		{1e-9, "$0.000000001"},
	} {
		if got := formatCost(tt.usd); got != tt.want {
			t.Errorf("formatCost(%g) = %s, want %s", tt.usd, got, tt.want)
		}
	}
}
