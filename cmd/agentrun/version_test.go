package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
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
		name    string
		info    debug.BuildInfo
		stamped string
		want    string
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
			name:    "stamped with -ldflags -X over the module's version",
			info:    debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", rev)},
			stamped: "v1.3.0",
			want:    "agentrun v1.3.0 · rev 0123abcd4567 · go1.26.8",
		},
		{
			name: "short revision and no time",
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs("vcs.revision", "abc123")},
			want: "agentrun v1.2.0 · rev abc123 · go1.26.8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(&tt.info, tt.stamped); got != tt.want {
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

// A release build's -ldflags -X version shows instead of (devel). (Whether the
// revision shows depends on the checkout and GOFLAGS' -buildvcs; TestVersionLine
// covers its format.)
func TestVersionOfBuiltBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agentrun")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "agentrun v9.9.9 · ") {
		t.Errorf("version: %v %q", err, out)
	}
}

// version --paths says where a spec's state is, from any folder, and masks a
// password in a store's URL.
func TestVersionPaths(t *testing.T) {
	t.Setenv("AGENTRUN_STORE", "")
	t.Setenv("AGENTRUN_INDEX", "")
	project := t.TempDir()
	if code, _, stderr := runCLI(t, "init", project); code != 0 {
		t.Fatal(stderr)
	}
	t.Chdir(t.TempDir())
	code, stdout, stderr := runCLI(t, "version", "--paths", filepath.Join(project, "agent.yaml"))
	state := filepath.Join(project, ".agentrun")
	if want := "memory store     sqlite:" + filepath.Join(state, "state.db") + "\nknowledge index  " + filepath.Join(state, "knowledge.db") + "\n"; code != 0 || stdout != want {
		t.Errorf("exit %d\n got %q\nwant %q\n%s", code, stdout, want, stderr)
	}
	t.Setenv("AGENTRUN_STORE", "postgres://agent:s3cret@db.internal:5432/agents")
	if _, stdout, _ := runCLI(t, "version", "--paths"); strings.Contains(stdout, "s3cret") || !strings.Contains(stdout, "postgres://agent:xxxxx@db.internal:5432/agents") {
		t.Errorf("version --paths: %q", stdout)
	}
	if code, _, _ := runCLI(t, "version", "a.yaml"); code != 2 {
		t.Errorf("version with a spec but no --paths: exit %d, want 2", code)
	}
}
