package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
)

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

// Colour only on a terminal and never with NO_COLOR set (to anything).
func TestExecUseColour(t *testing.T) {
	for _, tt := range []struct {
		terminal bool
		noColor  string
		want     bool
	}{
		{true, "", true},
		{true, "1", false},
		{true, "false", false}, // no-color.org: any value that is not empty
		{false, "", false},
	} {
		if got := useColour(tt.terminal, tt.noColor); got != tt.want {
			t.Errorf("useColour(%v, %q) = %v, want %v", tt.terminal, tt.noColor, got, tt.want)
		}
	}
}

// On a terminal the marks are coloured (✓ green, ✗ red, ! yellow) and the timings
// dim, in sub-runs too; a tool's output keeps its own text, marks included.
func TestExecProgressColours(t *testing.T) {
	events := []runtime.Event{
		{Kind: runtime.EventToolResult, Turn: 1, Tool: "lookup", Duration: 12 * time.Millisecond, Result: "✓ fine · 3s"},
		{Kind: runtime.EventToolResult, Turn: 1, Tool: "lookup", Duration: 2 * time.Second, Error: "boom", Result: "boom"},
		{Kind: runtime.EventGuard, Turn: 2, Guard: runtime.GuardMaxTurns, Message: "too many"},
		{Kind: runtime.EventModelResponse, Turn: 2, Usage: &model.Usage{TotalTokens: 25}, Duration: 1500 * time.Millisecond, Depth: 1},
	}
	want := []string{
		"[1]   " + ansiGreen + "✓" + ansiReset + " lookup · " + ansiDim + "12ms" + ansiReset + " · ✓ fine · " + ansiDim + "3s" + ansiReset + "\n",
		"[1]   " + ansiRed + "✗" + ansiReset + " lookup · " + ansiDim + "2s" + ansiReset + " · boom\n",
		"[2] " + ansiYellow + "!" + ansiReset + " guard max_turns  too many\n",
		"  │ [2] ← answer · 25 tokens · " + ansiDim + "1.5s" + ansiReset + "\n",
	}
	var plain, coloured bytes.Buffer
	pp, pc := &progress{w: &plain}, &progress{w: &coloured, colour: true}
	for i, e := range events {
		coloured.Reset()
		pc.Observe(e)
		if coloured.String() != want[i] {
			t.Errorf("event %d printed\n%q, want\n%q", i, coloured.String(), want[i])
		}
		pp.Observe(e)
	}
	if strings.Contains(plain.String(), "\x1b") {
		t.Errorf("colour without a terminal:\n%q", plain.String())
	}
}
