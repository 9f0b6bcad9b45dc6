package main

import (
	"context"
	"io"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123abcd4567890fedcba9876543210abcdef012"
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{
			name: "release with revision",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
				Settings: vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T09:00:00Z", "vcs.modified", "false")},
			want: "agentrun v1.2.0 · rev 0123abcd4567 (2026-11-30T09:00:00Z) · go1.26.8",
		},
		{
			name: "devel and dirty",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
				Settings: vcs("vcs.revision", rev, "vcs.time", "2026-11-30T09:00:00Z", "vcs.modified", "true")},
			want: "agentrun (devel) · rev 0123abcd4567+dirty (2026-11-30T09:00:00Z) · go1.26.8",
		},
		{
			name: "no VCS information",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("-buildmode", "exe")},
			want: "agentrun (devel) · go1.26.8",
		},
		{
			name: "no main version, as in a test binary",
			info: debug.BuildInfo{GoVersion: "go1.26.8"},
			want: "agentrun (devel) · go1.26.8",
		},
		{
			name: "short revision and no time",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs("vcs.revision", "abc123")},
			want: "agentrun v1.2.0 · rev abc123 · go1.26.8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(&tt.info); got != tt.want {
				t.Errorf("versionLine:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"version"}, strings.NewReader(""), &out, &errOut)
	if code != 0 || !strings.HasPrefix(out.String(), "agentrun ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("exit %d\nstdout: %q\nstderr: %q", code, out.String(), errOut.String())
	}
	if code := run(context.Background(), []string{"version", "extra"}, strings.NewReader(""), io.Discard, io.Discard); code != 2 {
		t.Errorf("version with an argument: exit %d, want 2", code)
	}
}

// --version prints the same line as `agentrun version`.
func TestVersionFlag(t *testing.T) {
	_, flag, _ := runCLI(t, "--version")
	_, cmd, _ := runCLI(t, "version")
	if flag == "" || flag != cmd {
		t.Errorf("--version %q, version %q", flag, cmd)
	}
}
