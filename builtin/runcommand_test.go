package builtin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitReadOnly is git narrowed the way the shell skill's example narrows it.
func gitReadOnly() map[string]any {
	return map[string]any{
		"program":              "git",
		"allow_code_execution": true,
		"subcommands":          []any{"status", "log", "diff", "show", "stash list"},
		"deny_options":         []any{"-c", "-C", "--config-env", "--exec-path", "--git-dir", "--work-tree", "--output", "--no-index", "--ext-diff", "--textconv"},
	}
}

func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed", name)
	}
	return p
}

func runCall(t *testing.T, tool any, command string, args ...string) (string, error) {
	t.Helper()
	list := make([]any, len(args))
	for i, a := range args {
		list[i] = a
	}
	return call(tool.(*runCommand), map[string]any{"command": command, "args": list})
}

// TestRunCommandRefusesCodeRunners: a program that runs code or other programs given
// in its arguments cannot be listed by name; the error names the entry, says why and
// how to opt in. Shells and launchers stay refused even with the opt-in.
func TestRunCommandRefusesCodeRunners(t *testing.T) {
	dir := t.TempDir()
	optIn := func(program string) map[string]any {
		return map[string]any{"program": program, "allow_code_execution": true}
	}
	tests := []struct {
		name  string
		allow []any
		want  []string // substrings of the error
	}{
		{"the skill's old example list: git", []any{"ls", "wc", "git"},
			[]string{"with.allow[2]: git runs commands from its options", "alias.x='!cmd'", "{program: git, allow_code_execution: true}"}},
		{"an interpreter", []any{"python3"},
			[]string{"with.allow[0]: python3 is an interpreter", "could run any code", "allow_code_execution: true", "subcommands, allow_options or deny_options"}},
		{"an interpreter with a version suffix", []any{"python3.12"}, []string{"python3.12 is an interpreter"}},
		{"an interpreter by path and case", []any{"/usr/bin/Perl5.36"}, []string{"/usr/bin/Perl5.36 is an interpreter"}},
		{"an interpreter with a Windows extension", []any{"node.exe"}, []string{"node.exe is an interpreter"}},
		{"ruby, php, lua, tclsh", []any{"ruby", "php8.2", "lua5.4", "tclsh8.6"},
			[]string{"with.allow[0]: ruby is an interpreter", "with.allow[1]: php8.2", "with.allow[2]: lua5.4", "with.allow[3]: tclsh8.6"}},
		{"awk family", []any{"awk", "gawk", "mawk"}, []string{"awk's system() runs commands", "with.allow[2]: mawk"}},
		{"sed", []any{"sed"}, []string{"its e command runs commands"}},
		{"find", []any{"find"}, []string{"-exec, -execdir"}},
		{"tar and rsync", []any{"tar", "rsync"}, []string{"--to-command", "rsync -e"}},
		{"ssh, make, docker", []any{"ssh", "make", "docker"}, []string{"with.allow[0]: ssh", "with.allow[1]: make", "with.allow[2]: docker"}},
		{"programs that run a program per file", []any{"rg", "fd", "sort", "split"},
			[]string{"with.allow[0]: rg runs a program", "with.allow[1]: fd", "with.allow[2]: sort", "with.allow[3]: split"}},
		{"a cross compiler", []any{"x86_64-linux-gnu-gcc-12"}, []string{"with.allow[0]: x86_64-linux-gnu-gcc-12 runs recipes"}},
		{"a shell", []any{"bash"}, []string{"with.allow[0]: bash would run any command it is given"}},
		{"a launcher", []any{"xargs"}, []string{"xargs would run any command it is given"}},
		{"launchers by path and version", []any{"/usr/bin/env", "nice", "timeout", "stdbuf", "sudo", "doas", "chroot", "nohup"},
			[]string{"with.allow[0]: /usr/bin/env would run", "with.allow[7]: nohup would run"}},
		{"a launcher even with the opt-in", []any{optIn("env")},
			[]string{"env would run any command", "allow_code_execution does not apply to shells and launchers"}},
		{"a shell even with the opt-in", []any{optIn("sh")}, []string{"allow_code_execution does not apply"}},
		{"every entry is reported", []any{"ls", "perl", "wc", "sed"}, []string{"with.allow[1]: perl", "with.allow[3]: sed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := build(t, "run_command", map[string]any{"allow": tt.allow}, dir)
			if tool != nil {
				t.Error("got a tool despite the error")
			}
			wantErrContains(t, err, tt.want...)
		})
	}
}

func TestRunCommandConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		with map[string]any
		want []string
	}{
		{"no allow", nil, []string{"run_command needs with.allow"}},
		{"empty allow", map[string]any{"allow": []any{}}, []string{"run_command needs with.allow"}},
		{"allow is not a list", map[string]any{"allow": "ls"}, []string{`with.allow must be a list of programs`, `not the string "ls"`}},
		{"an entry of the wrong type", map[string]any{"allow": []any{"ls", 3}}, []string{"with.allow[1] must be a program name or a mapping with program:, not the number 3"}},
		{"a command line instead of a name", map[string]any{"allow": []any{"git status"}},
			[]string{`with.allow[0]: "git status" is not a program name`, "{program: git, subcommands: [...]}"}},
		{"an empty name", map[string]any{"allow": []any{""}}, []string{"with.allow[0]: the program name is empty"}},
		{"a name listed twice", map[string]any{"allow": []any{"ls", map[string]any{"program": "ls"}}}, []string{"with.allow[1]: ls is listed twice"}},
		{"a mapping without program", map[string]any{"allow": []any{map[string]any{"subcommands": []any{"status"}}}},
			[]string{"with.allow[0] needs program:"}},
		{"an unknown key in an entry", map[string]any{"allow": []any{map[string]any{"program": "ls", "deny_option": []any{"-R"}}}},
			[]string{`with.allow[0]: unknown key "deny_option" (did you mean "deny_options"?)`, "an entry takes program, allow_code_execution"}},
		{"the opt-in is a boolean", map[string]any{"allow": []any{map[string]any{"program": "perl", "allow_code_execution": "yes"}}},
			[]string{`with.allow[0].allow_code_execution must be true or false, not the string "yes"`}},
		{"rules are lists of strings", map[string]any{"allow": []any{map[string]any{"program": "ls", "allow_options": "-l"}}},
			[]string{`with.allow[0].allow_options must be a list of strings, not the string "-l"`}},
		{"an option without a dash", map[string]any{"allow": []any{map[string]any{"program": "ls", "deny_options": []any{"R"}}}},
			[]string{`with.allow[0].deny_options: "R" is not an option`}},
		{"an option with a value", map[string]any{"allow": []any{map[string]any{"program": "ls", "allow_options": []any{"--color=never"}}}},
			[]string{`with.allow[0].allow_options: "--color=never" is not an option`}},
		{"-- is not an option", map[string]any{"allow": []any{map[string]any{"program": "ls", "deny_options": []any{"--"}}}},
			[]string{`"--" is not an option`}},
		{"a subcommand that is an option", map[string]any{"allow": []any{map[string]any{"program": "ls", "subcommands": []any{"-l"}}}},
			[]string{`with.allow[0].subcommands: "-l" is not a subcommand`}},
		{"an unknown key of with still lists allow", map[string]any{"allow": []any{"ls"}, "alow": []any{"wc"}},
			[]string{`unknown key "alow" in with (did you mean "allow"?); run_command takes allow, dir, timeout`}},
		{"every problem at once", map[string]any{"allow": []any{"python3"}, "timeout": "soon"},
			[]string{"python3 is an interpreter", `with.timeout "soon" is not a positive duration`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := build(t, "run_command", tt.with, dir)
			if tool != nil {
				t.Error("got a tool despite the error")
			}
			wantErrContains(t, err, tt.want...)
		})
	}
}

// TestRunCommandOptIn: allow_code_execution lists a code runner, and it runs.
func TestRunCommandOptIn(t *testing.T) {
	needProgram(t, "perl")
	dir := t.TempDir()
	tool := mustBuild(t, "run_command", map[string]any{"allow": []any{
		"ls", map[string]any{"program": "perl", "allow_code_execution": true},
	}}, dir)
	out, err := runCall(t, tool, "perl", "-e", "print 6*7")
	if err != nil || out != "42" {
		t.Fatalf("got %q, %v", out, err)
	}
}

// TestRunCommandGitAliasAttack is the attack of issue 14: git -c alias.x='!touch FILE' x.
// Each case runs a real git in a fresh directory and checks whether FILE exists after.
func TestRunCommandGitAliasAttack(t *testing.T) {
	needProgram(t, "git")
	tests := []struct {
		name     string
		allow    []any
		args     func(file string) []string
		buildErr string // the configuration is refused: nothing can run
		callErr  string // the call is refused: "" means it runs
		created  bool
	}{
		{name: "the old example list is refused at validate", allow: []any{"ls", "wc", "git"},
			buildErr: "with.allow[2]: git runs commands"},
		{name: "opted in, -c denied", allow: []any{"ls", "wc", gitReadOnly()},
			args:    func(f string) []string { return []string{"-c", "alias.x=!touch " + f, "x"} },
			callErr: `git: argument 1 "-c" is refused by the rule deny_options: -c is denied`},
		{name: "opted in, -c with its value attached", allow: []any{gitReadOnly()},
			args:    func(f string) []string { return []string{"-calias.x=!touch " + f, "x"} },
			callErr: `argument 1 "-calias.x=!touch`},
		{name: "opted in, --config-env", allow: []any{gitReadOnly()},
			args:    func(f string) []string { return []string{"--config-env=alias.x=HOME", "x"} },
			callErr: "deny_options: --config-env is denied"},
		{name: "opted in, -c after a subcommand", allow: []any{gitReadOnly()},
			args:    func(f string) []string { return []string{"log", "-c", "alias.x=!touch " + f} },
			callErr: "deny_options: -c is denied"},
		{name: "opted in, only subcommands: the alias is not a subcommand", allow: []any{map[string]any{
			"program": "git", "allow_code_execution": true, "subcommands": []any{"status", "log"}}},
			args:    func(f string) []string { return []string{"-c", "alias.x=!touch " + f, "x"} },
			callErr: `git: refused by the rule subcommands: the arguments must start with one of status, log, not "-c"`},
		{name: "opted in without rules: the spec author accepted it, and it runs", allow: []any{map[string]any{"program": "git", "allow_code_execution": true}},
			args:    func(f string) []string { return []string{"-c", "alias.x=!touch " + f, "x"} },
			created: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "FILE")
			tool, err := build(t, "run_command", map[string]any{"allow": tt.allow}, dir)
			if tt.buildErr != "" {
				wantErrContains(t, err, tt.buildErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = runCall(t, tool, "git", tt.args(file)...)
			if tt.callErr != "" {
				wantErrContains(t, err, tt.callErr)
			} else if err != nil {
				t.Fatalf("call: %v", err)
			}
			if _, err := os.Stat(file); (err == nil) != tt.created {
				t.Errorf("FILE created = %v, want %v", err == nil, tt.created)
			}
		})
	}
}

// TestRunCommandArgumentRules checks the rules on the model's arguments: subcommands,
// allow_options and deny_options in the spellings programs accept, and "--", which
// does not switch the checks off.
func TestRunCommandArgumentRules(t *testing.T) {
	git := allowedProgram{Program: "git", AllowCodeExecution: true,
		Subcommands: []string{"status", "log", "diff", "stash list"},
		DenyOptions: []string{"-c", "-C", "--exec-path", "--output", "--no-index"}}
	ls := allowedProgram{Program: "ls", AllowOptions: []string{"-l", "-a", "-1", "--color"}}
	find := allowedProgram{Program: "find", AllowCodeExecution: true,
		DenyOptions: []string{"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprintf"}}
	tests := []struct {
		name    string
		program allowedProgram
		args    []string
		refused string // substring of the refusal; "" means allowed
	}{
		{"a listed subcommand with options", git, []string{"log", "--oneline", "-n", "3"}, ""},
		{"a two-word subcommand", git, []string{"stash", "list"}, ""},
		{"another word after a one-word subcommand", git, []string{"stash", "pop"}, `must start with one of status, log, diff, stash list, not "stash"`},
		{"a subcommand not listed", git, []string{"push"}, `rule subcommands`},
		{"no subcommand at all", git, nil, "not nothing"},
		{"an option before the subcommand", git, []string{"--no-pager", "log"}, `not "--no-pager"`},
		{"-- before the subcommand", git, []string{"--", "status"}, `not "--"`},
		{"a denied short option", git, []string{"log", "-c"}, `argument 2 "-c" is refused by the rule deny_options: -c is denied`},
		{"a denied short option with its value attached", git, []string{"log", "-C/tmp"}, "-C is denied"},
		{"a denied short option in a cluster", git, []string{"log", "-pc"}, "-c is denied"},
		{"short options are case-sensitive", git, []string{"log", "-M"}, ""},
		{"a denied long option", git, []string{"diff", "--no-index", "/etc/passwd", "x"}, "--no-index is denied"},
		{"a denied long option with =value", git, []string{"--exec-path=/tmp", "log"}, "--exec-path is denied"},
		{"a denied long option abbreviated", git, []string{"diff", "--out=/tmp/x"}, "--output is denied"},
		{"a denied long option abbreviated with one dash", git, []string{"diff", "-outp=/tmp/x"}, "--output is denied"},
		{"a denied long option with one dash", git, []string{"log", "-exec-path"}, "is denied"},
		{"a longer option that merely starts like a denied one", git, []string{"diff", "--output-indicator-new=+"}, ""},
		{"the negation of a denied option is another option", git, []string{"diff", "--no-output"}, ""},
		{"a denied option after --", git, []string{"log", "--", "-c"}, `argument 3 "-c" is refused`},
		{"-- and a path after it", git, []string{"log", "--", "README.md"}, ""},
		{"a path that starts with ./", git, []string{"log", "--", "./-c"}, ""},
		{"allowed options", ls, []string{"-l", "-a", "--color=never", "docs"}, ""},
		{"a cluster of allowed letters", ls, []string{"-la1"}, ""},
		{"a letter not allowed in a cluster", ls, []string{"-laR"}, `argument 1 "-laR" is refused by the rule allow_options: the options allowed are -l, -a, -1, --color`},
		{"an option not allowed", ls, []string{"--recursive"}, "rule allow_options"},
		{"an abbreviation of an allowed option is not allowed", ls, []string{"--col"}, "rule allow_options"},
		{"a short option's value attached", ls, []string{"-l5"}, "rule allow_options"},
		{"a short option with =value", ls, []string{"-a=R"}, "rule allow_options"},
		{"a denied letter spelt --c", git, []string{"log", "--c=alias.x=!touch"}, "is refused"},
		{"standard input is not an option", ls, []string{"-"}, ""},
		{"-- itself is not an option", ls, []string{"--", "x"}, ""},
		{"an option not allowed after --", ls, []string{"--", "-R"}, `argument 2 "-R" is refused by the rule allow_options`},
		{"find with a harmless expression", find, []string{".", "-name", "*.go", "-type", "f"}, ""},
		{"find -exec", find, []string{".", "-exec", "touch", "x", ";"}, "-exec is denied"},
		{"find --exec", find, []string{".", "--exec", "touch", "x", ";"}, "-exec is denied"},
		{"find -execdir is its own rule", find, []string{".", "-execdir", "touch", "x", ";"}, "-execdir is denied"},
		{"find -delete", find, []string{".", "-delete"}, "-delete is denied"},
		{"find -exec after --", find, []string{"--", ".", "-exec", "touch", "x", ";"}, "-exec is denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.program.checkArgs(tt.args)
			if tt.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantErrContains(t, err, tt.refused)
		})
	}
}

// TestRunCommandRulesWithRealPrograms runs the rules through the tool: an allowed call
// runs the program, a refused one never starts it.
func TestRunCommandRulesWithRealPrograms(t *testing.T) {
	needProgram(t, "find")
	needProgram(t, "ls")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "a\n", "sub/b.go": "package b\n"})
	tool := mustBuild(t, "run_command", map[string]any{"allow": []any{
		map[string]any{"program": "ls", "allow_options": []any{"-1", "-a"}},
		map[string]any{"program": "find", "allow_code_execution": true,
			"deny_options": []any{"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"}},
	}}, dir)
	marker := filepath.Join(dir, "MARKER")
	tests := []struct {
		name    string
		command string
		args    []string
		want    string // in the output, or in the error when refused
		refused bool
	}{
		{"ls with allowed options", "ls", []string{"-1a"}, "a.txt\nsub\n", false},
		{"ls with an option not allowed", "ls", []string{"-R"}, "rule allow_options", true},
		{"find with a harmless expression", "find", []string{".", "-name", "*.go"}, "./sub/b.go", false},
		{"find -exec", "find", []string{".", "-exec", "touch", marker, ";"}, "-exec is denied", true},
		{"find -exec after --", "find", []string{"--", ".", "-exec", "touch", marker, ";"}, "-exec is denied", true},
		{"find -delete", "find", []string{".", "-name", "a.txt", "-delete"}, "-delete is denied", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCall(t, tool, tt.command, tt.args...)
			if tt.refused {
				wantErrContains(t, err, tt.want)
			} else if err != nil || !strings.Contains(out, tt.want) {
				t.Errorf("got %q, %v; want %q", out, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a refused find -exec ran")
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err != nil {
		t.Error("a refused find -delete deleted a.txt")
	}
}

// TestRunCommandResolvesLinks: a harmless name that is a link to a code runner is
// refused where it is found on PATH, at build time and again at call time; a link to
// a multi-call binary runs the applet it is named after and is judged by its name.
func TestRunCommandResolvesLinks(t *testing.T) {
	bin := t.TempDir()
	dir := t.TempDir()
	marker := filepath.Join(dir, "MARKER")
	writeFiles(t, bin, map[string]string{"perl5.36": "#!/bin/sh\ntouch " + marker + "\n", "busybox": "#!/bin/sh\necho applet\n"})
	for _, f := range []string{"perl5.36", "busybox"} {
		if err := os.Chmod(filepath.Join(bin, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	symlink(t, "perl5.36", filepath.Join(bin, "report"))
	symlink(t, "busybox", filepath.Join(bin, "lister"))

	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	_, err := build(t, "run_command", map[string]any{"allow": []any{"report"}}, dir)
	wantErrContains(t, err, "with.allow[0]: report (a link to "+filepath.Join(bin, "perl5.36")+") is an interpreter")
	if _, err := build(t, "run_command", map[string]any{"allow": []any{"lister"}}, dir); err != nil {
		t.Errorf("a link to a multi-call binary: %v", err)
	}

	// Built while report is not on PATH; by the time of the call it is.
	t.Setenv("PATH", os.Getenv("PATH")[len(bin)+1:])
	tool := mustBuild(t, "run_command", map[string]any{"allow": []any{"report"}}, dir)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	_, err = runCall(t, tool, "report")
	wantErrContains(t, err, "report is not run: report (a link to", "is an interpreter")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the refused program ran")
	}
}

func TestRunCommandDescribesItsRules(t *testing.T) {
	tool := mustBuild(t, "run_command", map[string]any{"allow": []any{"wc",
		map[string]any{"program": "ls", "allow_options": []any{"-l", "-a"}},
		gitReadOnly(),
	}}, t.TempDir())
	info := tool.(*runCommand).Describe()
	for _, want := range []string{"wc, ls (only the options -l -a), git (arguments start with one of: status, log, diff, show, stash list; never the options -c -C "} {
		if !strings.Contains(info.Description, want) {
			t.Errorf("description lacks %q:\n%s", want, info.Description)
		}
	}
	enum := info.Parameters["properties"].(map[string]any)["command"].(map[string]any)["enum"].([]any)
	if len(enum) != 3 || enum[0] != "wc" || enum[2] != "git" {
		t.Errorf("enum %v", enum)
	}
}

// TestRunCommandWithoutAShell keeps what the tool always did: arguments reach the
// program as they are, and a program outside the list does not run.
func TestRunCommandWithoutAShell(t *testing.T) {
	needProgram(t, "echo")
	tool := mustBuild(t, "run_command", map[string]any{"allow": []any{"echo"}}, t.TempDir())
	out, err := runCall(t, tool, "echo", "$(id)", "*", "a;b")
	if err != nil || out != "$(id) * a;b\n" {
		t.Errorf("got %q, %v", out, err)
	}
	_, err = runCall(t, tool, "sh", "-c", "id")
	wantErrContains(t, err, "sh is not one of the programs this tool may run: echo")
}
