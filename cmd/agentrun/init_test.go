package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/examples"
)

// checkInitialized runs what init tells a new team to run next: validate --strict
// and the scenario tests, both on what init wrote.
func checkInitialized(t *testing.T, dir, main string) {
	t.Helper()
	if code, stdout, stderr := runCLI(t, "validate", "--strict", dir); code != 0 {
		t.Errorf("validate --strict: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runCLI(t, "test", dir); code != 0 {
		t.Errorf("test: exit %d\n%s%s", code, stdout, stderr)
	}
	// The modeline points at a schema init wrote, so editors find it outside this repository.
	src, err := os.ReadFile(filepath.Join(dir, main))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(src), "\n")
	if first != "# yaml-language-server: $schema=schema/agent.schema.json" {
		t.Errorf("%s starts with %q", main, first)
	}
	if _, err := os.Stat(filepath.Join(dir, "schema", "agent.schema.json")); err != nil {
		t.Error(err)
	}
	ignore, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || !strings.Contains(string(ignore), "\n.agentrun/\n") {
		t.Errorf(".gitignore %q (%v), want a line .agentrun/", ignore, err)
	}
}

func TestInitNewAgent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Billing Bot")
	code, stdout, stderr := runCLI(t, "init", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"wrote agent.yaml, agent.test.yaml, ", "next:\n  cd " + dir + "\n", "agentrun validate --strict agent.yaml\n", "agentrun test\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	checkInitialized(t, dir, "agent.yaml")
	spec, _ := os.ReadFile(filepath.Join(dir, "agent.yaml"))
	if !strings.Contains(string(spec), "\nname: billing-bot\n") {
		t.Errorf("the agent is not named after its directory:\n%s", spec)
	}
}

// Each portable example is copied with what it needs — skill packs, sub-agents,
// knowledge files — and holds up outside this repository.
func TestInitFromExample(t *testing.T) {
	for _, name := range examples.Portable() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			code, stdout, stderr := runCLI(t, "init", "--from", name, dir)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			checkInitialized(t, dir, name+".yaml")
			// A skill pack's modeline climbs to the same schema/.
			skill, err := os.ReadFile(filepath.Join(dir, "skills", "orders", "skill.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(skill), "# yaml-language-server: $schema=../../schema/skill.schema.json\n") {
				t.Errorf("skill.yaml starts with %q", strings.SplitN(string(skill), "\n", 2)[0])
			}
		})
	}
	// shop-support hands refunds to refund-specialist and answers from the help centre.
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "init", "--from", "shop-support", dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, f := range []string{"refund-specialist.yaml", "help-center/faq.yaml", "help-center/coupons.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "code-assistant.yaml")); err == nil {
		t.Error("an example shop-support does not use was copied too")
	}
}

func TestInitUnknownExample(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "init", "--from", "code-assistant", dir)
	if code != 2 || !strings.Contains(stderr, `no bundled example "code-assistant": use one of order-digest, refund-specialist, shop-support`) {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %v", entries)
	}
}

func TestInitRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "agent.test.yaml")
	if err := os.WriteFile(mine, []byte("cases: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "init", dir)
	if code != 2 || !strings.Contains(stderr, "these files exist: "+mine) {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	// Nothing at all was written, not even the files that were free.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %v", entries)
	}
	if b, _ := os.ReadFile(mine); string(b) != "cases: []\n" {
		t.Errorf("agent.test.yaml was changed: %q", b)
	}
}

// A folder with files of its own is fine when nothing would be overwritten; files
// init wrote before, unchanged, are left alone, so init can run twice.
func TestInitNonEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# ours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "init", dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	ignore, _ := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if !strings.HasPrefix(string(ignore), "node_modules\n") {
		t.Errorf(".gitignore %q", ignore)
	}
	checkInitialized(t, dir, "agent.yaml")
	code, stdout, stderr := runCLI(t, "init", dir)
	if code != 0 || !strings.Contains(stdout, "nothing to write") {
		t.Errorf("second init: exit %d\n%s%s", code, stdout, stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, ".gitignore")); string(again) != string(ignore) {
		t.Errorf(".gitignore changed on the second init: %q", again)
	}
	// Two examples share skills/orders: the second copy finds it identical.
	if code, _, stderr := runCLI(t, "init", "--from", "order-digest", dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "init", "--from", "refund-specialist", dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}
