package builtin

import (
	"strings"
	"testing"
	"time"
)

func TestCurrentTime(t *testing.T) {
	// 2026-03-01 23:30:15.5 UTC is already Monday in Tokyo and still Sunday in New York.
	fixed := time.Date(2026, 3, 1, 23, 30, 15, 500_000_000, time.UTC)
	tests := []struct {
		name string
		with map[string]any
		args map[string]any
		want string
	}{
		{"UTC by default", nil, map[string]any{}, "2026-03-01T23:30:15Z (Sunday, UTC)"},
		{"configured zone", map[string]any{"timezone": "Asia/Tokyo"}, map[string]any{}, "2026-03-02T08:30:15+09:00 (Monday, Asia/Tokyo)"},
		{"argument overrides the configured zone", map[string]any{"timezone": "Asia/Tokyo"},
			map[string]any{"timezone": "America/New_York"}, "2026-03-01T18:30:15-05:00 (Sunday, America/New_York)"},
		{"empty argument keeps the configured zone", map[string]any{"timezone": "Europe/Paris"},
			map[string]any{"timezone": ""}, "2026-03-02T00:30:15+01:00 (Monday, Europe/Paris)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := mustBuild(t, "current_time", tt.with, "")
			tool.(*currentTime).now = func() time.Time { return fixed }
			got, err := call(tool, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCurrentTimeRealClock(t *testing.T) {
	tool := mustBuild(t, "current_time", nil, "")
	got, err := call(tool, nil)
	if err != nil {
		t.Fatal(err)
	}
	stamp, _, _ := strings.Cut(got, " ")
	ts, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		t.Fatalf("%q does not start with an RFC 3339 time: %v", got, err)
	}
	if d := time.Since(ts); d < -time.Second || d > time.Minute {
		t.Errorf("time %s is %s away from now", ts, d)
	}
}

func TestCurrentTimeErrors(t *testing.T) {
	tool := mustBuild(t, "current_time", nil, "")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown zone", map[string]any{"timezone": "Europe/Atlantis"}, `unknown time zone "Europe/Atlantis"; use an IANA name`},
		{"machine-local zone", map[string]any{"timezone": "Local"}, `"Local" is not an IANA time zone name`},
		{"a path is not a zone", map[string]any{"timezone": "../../../etc/passwd"}, "unknown time zone"},
		{"wrong type", map[string]any{"timezone": 2.0}, "argument timezone must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(tool, tt.args)
			wantErrContains(t, err, tt.want)
		})
	}
}
