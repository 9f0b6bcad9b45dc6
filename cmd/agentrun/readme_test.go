package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/examples/shop-api/shop"
)

// The README shows what its commands print. These tests run the commands and compare,
// so the README cannot drift from the program again.

// readmeBlock returns the lines of a fenced block: the one that follows the prose
// line containing marker, or, when marker is a line inside a block (a shown
// command), that block from the line after it.
func readmeBlock(t *testing.T, marker string) []string {
	t.Helper()
	lines := readmeLines(t)
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, marker) })
	if start < 0 {
		t.Fatalf("README has no line with %q", marker)
	}
	if !strings.HasPrefix(marker, "$ ") {
		for start < len(lines) && !strings.HasPrefix(lines[start], "```") {
			start++
		}
	}
	var out []string
	for _, l := range lines[start+1:] {
		if strings.HasPrefix(l, "```") {
			return out
		}
		out = append(out, l)
	}
	t.Fatalf("the block after %q is not closed", marker)
	return nil
}

var (
	durationRe = regexp.MustCompile(`\d+(\.\d+)?(ns|µs|ms|s)\b`)
	numberRe   = regexp.MustCompile(`\d+`)
	runIDRe    = regexp.MustCompile(`\brun_[0-9a-f]+\b`)
)

// normalizeRun hides what changes from run to run or commit to commit: run ids,
// durations, token counts, sizes.
func normalizeRun(s string) string {
	s = runIDRe.ReplaceAllString(s, "run_<id>")
	return numberRe.ReplaceAllString(durationRe.ReplaceAllString(s, "<time>"), "<n>")
}

// sameLines compares the README's lines with the output's: equal after
// normalizing, except that a README line ending in … shows only the start of its
// line. Tool results of one response arrive in any order, so the indented lines of
// a turn are compared as a set.
func sameLines(t *testing.T, readme, got []string) {
	t.Helper()
	key := func(l string) string {
		nested := len(l) - len(strings.TrimLeft(l, " │")) // a sub-agent's lines are indented with "  │ "
		if i := strings.Index(l[nested:], "   "); strings.HasPrefix(l[nested:], "[") && i > 0 {
			return l[:nested+i] // a tool line: "[1]" and its indentation
		}
		return l
	}
	group := func(lines []string) [][]string {
		var out [][]string
		for _, l := range lines {
			l = normalizeRun(l)
			if n := len(out); n > 0 && strings.Contains(l, "]   ") && strings.Contains(out[n-1][0], "]   ") && key(l) == key(out[n-1][0]) {
				out[n-1] = append(out[n-1], l)
				continue
			}
			out = append(out, []string{l})
		}
		for _, g := range out {
			slices.Sort(g)
		}
		return out
	}
	want, have := group(readme), group(got)
	if len(want) != len(have) {
		t.Fatalf("the README shows %d lines, the command prints %d:\nREADME:\n%s\nprinted:\n%s",
			len(readme), len(got), strings.Join(readme, "\n"), strings.Join(got, "\n"))
	}
	for i := range want {
		if len(want[i]) != len(have[i]) {
			t.Errorf("README group %v, printed %v", want[i], have[i])
			continue
		}
		for j, w := range want[i] {
			h := have[i][j]
			if prefix, cut := strings.CutSuffix(w, "…"); cut && strings.HasPrefix(h, prefix) || w == h {
				continue
			}
			t.Errorf("README line\n  %s\ndoes not match the printed line\n  %s", w, h)
		}
	}
}

func TestReadmeQuickStart(t *testing.T) {
	readme := readmeBlock(t, "Progress goes to stderr, the answer to")
	code, stdout, stderr := runCLI(t, "exec", "--model", "test", "../../examples/agents/code-assistant.yaml", "How long is README.md, and what is 2*(3+4)?")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	printed := strings.Split(strings.TrimRight(stderr+stdout, "\n"), "\n")
	sameLines(t, readme, printed)
}

func TestReadmeCacheHit(t *testing.T) {
	// A copy of the example at the same path below a fresh folder, with the state in
	// its default place: the first run indexes, and the header shows where as in a clone.
	t.Setenv("AGENTRUN_INDEX", "")
	t.Setenv("AGENTRUN_STORE", "")
	root := t.TempDir()
	if code, _, stderr := runCLI(t, "init", "--from", "shop-support", filepath.Join(root, "examples", "agents")); code != 0 {
		t.Fatal(stderr)
	}
	readme := readmeBlock(t, "tokens, about a millisecond")
	t.Chdir(root)
	code, stdout, stderr := runCLI(t, "exec", "--model", "test", "examples/agents/shop-support.yaml", "配送费多少钱？")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	printed := strings.Split(strings.TrimRight(stderr+stdout, "\n"), "\n")
	sameLines(t, readme, printed)
}

func TestReadmeExplainTable(t *testing.T) {
	readme := readmeBlock(t, "$ agentrun explain examples/agents/shop-support.yaml")
	code, stdout, stderr := runCLI(t, "explain", shopSupport)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	printed := strings.Split(stdout, "\n")
	if len(printed) < len(readme) {
		t.Fatalf("explain printed %d lines, the README shows %d", len(printed), len(readme))
	}
	for i, l := range readme {
		if printed[i] != l {
			t.Errorf("README line %d\n  %s\nexplain prints\n  %s", i+1, l, printed[i])
		}
	}
}

func TestReadmeValidateExample(t *testing.T) {
	readme := readmeBlock(t, "$ agentrun validate spec/testdata/invalid/intent_unknown_domain.yaml")
	code, stdout, _ := runCLI(t, "validate", "../../spec/testdata/invalid/intent_unknown_domain.yaml")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	printed := strings.ReplaceAll(strings.TrimRight(stdout, "\n"), "../../", "")
	if want := strings.Join(readme, "\n"); printed != want {
		t.Errorf("README shows\n%s\nvalidate prints\n%s", want, printed)
	}
}

// TestReadmeShop runs the README's shop walk-through against the demo shop, each
// command as the README writes it (the paused run's id from the run before), and
// compares what each prints.
func TestReadmeShop(t *testing.T) {
	// A copy of the examples at the same path below a fresh folder, with the state
	// in its default place: the first run indexes, and the headers show where, as
	// in a clone.
	t.Setenv("AGENTRUN_INDEX", "")
	t.Setenv("AGENTRUN_STORE", "")
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "examples", "agents"), os.DirFS("../../examples/agents")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(shop.New())
	defer srv.Close()
	t.Setenv("SHOP_API", srv.URL)
	if got, want := readmeBlock(t, "$ go run ./examples/shop-api"), shop.Banner(shop.DefaultAddr); len(got) != 1 || got[0] != want {
		t.Errorf("the README shows the demo shop starting with %q, it prints %q", got, want)
	}

	wantCodes := []int{0, exitAwaitingApproval, 0, 0, 0} // status, cancel (paused), resume, refund, digest
	var commands []string
	for _, l := range readmeSection(t, "## Trying the shop") {
		if strings.HasPrefix(l, "$ agentrun ") {
			commands = append(commands, l)
		}
	}
	if len(commands) != len(wantCodes) {
		t.Fatalf("the README's shop section shows %d agentrun commands, want %d: %q", len(commands), len(wantCodes), commands)
	}
	shown := make([][]string, len(commands))
	for i, command := range commands {
		shown[i] = readmeBlock(t, command)
	}
	t.Chdir(root)
	runID := ""
	for i, command := range commands {
		args := shellFields(strings.TrimPrefix(command, "$ agentrun "))
		for j, a := range args {
			if runIDRe.MatchString(a) && runID != "" {
				args[j] = runID
			}
		}
		code, stdout, stderr := runCLI(t, args...)
		if code != wantCodes[i] {
			t.Fatalf("%s: exit %d, want %d\n%s%s", command, code, wantCodes[i], stderr, stdout)
		}
		if id := runIDRe.FindString(stderr); id != "" {
			runID = id
		}
		// The resume commands name the spec by its absolute path, which the README
		// writes as a clone's.
		printed := strings.ReplaceAll(stderr+stdout, root, "/path/to/agentrun")
		sameLines(t, shown[i], strings.Split(strings.TrimRight(printed, "\n"), "\n"))
	}
}

func readmeLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// readmeSection returns the README's lines under heading, up to the next heading of
// its level.
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	lines := readmeLines(t)
	start := slices.Index(lines, heading)
	if start < 0 {
		t.Fatalf("README has no heading %q", heading)
	}
	level := strings.Fields(heading)[0] + " "
	for i, l := range lines[start+1:] {
		if strings.HasPrefix(l, level) {
			return lines[start+1 : start+1+i]
		}
	}
	return lines[start+1:]
}

// shellFields splits a shown command line as a shell would for the README's
// commands: at spaces, except inside double quotes.
func shellFields(line string) []string {
	var fields []string
	var field strings.Builder
	quoted, started := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case r == ' ' && !quoted:
			if started {
				fields = append(fields, field.String())
				field.Reset()
				started = false
			}
		default:
			field.WriteRune(r)
			started = true
		}
	}
	if started {
		fields = append(fields, field.String())
	}
	return fields
}
