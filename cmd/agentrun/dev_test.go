package main

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// copyTree copies the files of dir into to.
func copyTree(t *testing.T, dir, to string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// saveAsEditorsDo replaces a file the way many editors save: a new file renamed
// over the old one.
func saveAsEditorsDo(t *testing.T, path string, edit func(string) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(edit(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// devStatus is GET /v1/status's body.
type devStatus struct {
	OK          bool     `json:"ok"`
	LoadedAt    string   `json:"loaded_at"`
	Agents      []string `json:"agents"`
	Error       string   `json:"error"`
	Diagnostics []struct {
		File, Message, Severity string
		Line, Col               int
	} `json:"diagnostics"`
}

// agentrun dev reloads the agents when their spec or a skill they use changes on
// disk, and keeps the old ones (saying why on /v1/status) when the new spec is
// invalid.
func TestDevReloadsOnSave(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"shop-support.yaml", "refund-specialist.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/agents", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyTree(t, "../../examples/agents/skills", filepath.Join(dir, "skills"))
	copyTree(t, "../../examples/agents/help-center", filepath.Join(dir, "help-center"))
	specFile := filepath.Join(dir, "shop-support.yaml")
	dev := startInProcess(t, regexp.MustCompile(`agentrun dev: console at http://(\S+)/ui/`),
		"dev", "--model", "test", "--store", "memory:", "--index", filepath.Join(t.TempDir(), "knowledge.db"),
		"--addr", "127.0.0.1:0", specFile)

	description := func() string {
		var v struct {
			Agents []struct{ Name, Description string }
		}
		if code := dev.getJSON(t, "/v1/agents", "", &v); code != http.StatusOK || len(v.Agents) != 1 {
			t.Fatalf("GET /v1/agents: %d %+v", code, v)
		}
		return v.Agents[0].Description
	}
	status := func() devStatus {
		var s devStatus
		if code := dev.getJSON(t, "/v1/status", "", &s); code != http.StatusOK {
			t.Fatalf("GET /v1/status: %d", code)
		}
		return s
	}
	if got := description(); got != "Customer service for a food-delivery shop." {
		t.Fatalf("description = %q", got)
	}
	first := status()
	if !first.OK || first.LoadedAt == "" {
		t.Fatalf("status at start = %+v", first)
	}

	// A valid edit is served.
	const edited = "description: Edited on disk."
	saveAsEditorsDo(t, specFile, func(s string) string {
		return strings.Replace(s, "description: Customer service for a food-delivery shop.", edited, 1)
	})
	eventually(t, 20*time.Second, "the edited description", func() bool { return description() == "Edited on disk." })
	second := status()
	if !second.OK || second.LoadedAt == first.LoadedAt {
		t.Errorf("status after the edit = %+v, want ok and loaded_at after %s", second, first.LoadedAt)
	}

	// An invalid spec: the old agent goes on, the status says where and why.
	saveAsEditorsDo(t, specFile, func(s string) string { return s + "bogus_key: 1\n" })
	var broken devStatus
	eventually(t, 20*time.Second, "the failed reload's status", func() bool { broken = status(); return !broken.OK })
	found := false
	for _, d := range broken.Diagnostics {
		if filepath.Base(d.File) == "shop-support.yaml" && d.Line > 0 && strings.Contains(d.Message, "bogus_key") {
			found = true
		}
	}
	if !found || broken.Error == "" {
		t.Errorf("status after an invalid edit = %+v, want the unknown key's diagnostic", broken)
	}
	if got := description(); got != "Edited on disk." {
		t.Errorf("after a failed reload the description is %q, want the one loaded before", got)
	}
	eventually(t, 20*time.Second, "the failure on stderr", func() bool {
		s := dev.stderr.String()
		return strings.Contains(s, `unknown key "bogus_key"`) && strings.Contains(s, "agentrun dev: kept the agents loaded before")
	})

	// Fixed: served again.
	saveAsEditorsDo(t, specFile, func(s string) string { return strings.Replace(s, "bogus_key: 1\n", "", 1) })
	var fixed devStatus
	eventually(t, 20*time.Second, "the fixed spec's status", func() bool { fixed = status(); return fixed.OK })

	// A skill the spec uses is watched too: written in place this time.
	skill := filepath.Join(dir, "skills", "orders", "skill.yaml")
	data, err := os.ReadFile(skill)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skill, append(data, "# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a reload after the skill's edit", func() bool { s := status(); return s.OK && s.LoadedAt != fixed.LoadedAt })
}

// agentrun dev serves without authentication: any address that is not loopback
// is refused before anything is loaded.
func TestDevRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:80", ":8080", "[::]:0"} {
		code, _, stderr := runCLI(t, "dev", "--addr", addr, "no-such-spec.yaml")
		if code != 2 {
			t.Errorf("dev --addr %s: exit %d, want 2", addr, code)
		}
		want := "agentrun dev: refusing --addr " + addr + ": dev serves without authentication, so only on a loopback address"
		if !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("dev --addr %s: stderr %q, want the one line %q…", addr, stderr, want)
		}
		if strings.Contains(stderr, "console at") || strings.Contains(stderr, "no-such-spec") {
			t.Errorf("dev --addr %s went on: %q", addr, stderr)
		}
	}
}
