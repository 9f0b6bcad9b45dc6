package builtin

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// A program in run_command's allow list runs with arguments the model chooses, so a
// program that treats an argument as code, or as another program to start, gives the
// model everything the allow list was meant to withhold. These tables name such
// programs by base name; they cannot be complete, which the threat model in
// docs/skills.md says.

// launchers run the program named in their arguments. Listing one allows every
// program, like a shell, so no opt-in lifts the refusal: list the programs themselves.
var launchers = []string{
	"env", "xargs", "nohup", "nice", "timeout", "gtimeout", "stdbuf", "time", "watch", "exec", "command",
	"sudo", "doas", "su", "runuser", "pkexec", "chroot", "unshare", "nsenter", "setsid", "setpriv",
	"prlimit", "ionice", "chrt", "taskset", "numactl", "cgexec", "chpst", "sg", "newgrp", "flock",
	"strace", "ltrace", "valgrind", "gdb", "lldb", "perf", "catchsegv", "script", "screen", "tmux",
	"parallel", "firejail", "bwrap", "systemd-run", "fakeroot", "proot", "faketime", "torsocks",
	"proxychains", "proxychains4", "rlwrap", "unbuffer", "xvfb-run", "dbus-launch", "dbus-run-session",
	"toybox", "at", "batch", "crontab", "sandbox-exec", "caffeinate", "open", "xdg-open", "start",
}

// codeRunners run code or programs that their arguments name or contain. Listing one
// needs allow_code_execution: true on its entry, ideally with argument rules.
var codeRunners = []struct {
	why   string // completes "<program> …", for the diagnostic
	names []string
}{
	{"is an interpreter: an argument can be a program to run (-c or -e code, or a script file)", []string{
		"python", "pythonw", "py", "pypy", "jython", "ipython", "bpython", "perl", "ruby", "irb", "erb", "jruby",
		"node", "nodejs", "deno", "bun", "ts-node", "tsx", "php", "php-cgi", "lua", "luajit", "tclsh", "wish",
		"expect", "rscript", "r", "julia", "java", "jshell", "groovy", "scala", "kotlin", "erl", "escript",
		"elixir", "iex", "ghci", "runghc", "runhaskell", "guile", "racket", "sbcl", "clisp", "ocaml", "swift",
		"dotnet", "osascript", "dc", "m4", "gnuplot", "sqlite", "psql", "mysql", "octave", "raku", "crystal",
		"clojure", "clj", "jupyter", "matlab"}},
	{"runs a program on the files it handles (rg --pre, fd -x/-X, sort --compress-program, split --filter, tcpdump -z, convert '|cmd')", []string{
		"rg", "ripgrep", "fd", "fdfind", "sort", "split", "sdiff", "tcpdump", "convert", "magick", "mogrify"}},
	{"runs the awk program given as an argument, and awk's system() runs commands", []string{
		"awk", "gawk", "mawk", "nawk", "goawk"}},
	{"runs the sed script given as an argument: its e command runs commands and its w command writes files", []string{
		"sed", "gsed"}},
	{"runs programs and changes files through its expression (-exec, -execdir, -ok, -okdir, -delete, -fprint)", []string{
		"find", "gfind", "bfs"}},
	{"runs commands from its options and its configuration: aliases (git -c alias.x='!cmd' x), " +
		"--exec-path, --upload-pack, --config-env, hooks and diff or merge drivers", []string{
		"git", "hg", "svn"}},
	{"runs the programs its options name (tar --to-command, --use-compress-program, --checkpoint-action=exec; zip -TT)", []string{
		"tar", "gtar", "bsdtar", "zip"}},
	{"runs commands locally or on other hosts (ssh -o ProxyCommand=…, scp -S, rsync -e, nc -e, socat EXEC:, wget --use-askpass)", []string{
		"ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "socat", "wget"}},
	{"runs recipes, build scripts or compiler plugins that its arguments name (make --eval, go run, gcc -wrapper)", []string{
		"make", "gmake", "bmake", "cmake", "ninja", "meson", "bazel", "mvn", "gradle", "ant", "rake",
		"cargo", "go", "rustc", "gcc", "cc", "g++", "c++", "clang", "clang++", "javac", "ld"}},
	{"installs or runs packages, whose scripts run code (npx pkg, pip install, apt-get -o …::Pre-Invoke=cmd)", []string{
		"npm", "npx", "yarn", "pnpm", "pip", "pipx", "uv", "uvx", "poetry", "gem", "bundle", "composer",
		"conda", "cpan", "luarocks", "apt", "apt-get", "dpkg", "rpm", "yum", "dnf", "apk", "brew", "nix"}},
	{"runs commands in containers or on other machines (docker run, kubectl exec, ansible -m shell)", []string{
		"docker", "podman", "nerdctl", "kubectl", "helm", "ansible", "ansible-playbook", "terraform", "vagrant"}},
	{"runs commands its arguments give (vim -c '!cmd', emacs --eval, man -P cmd, less +!cmd, pandoc --filter, pdflatex -shell-escape, gs -dNOSAFER)", []string{
		"vi", "vim", "nvim", "view", "vimdiff", "ex", "emacs", "less", "more", "man", "pandoc", "tex", "latex",
		"pdflatex", "xelatex", "lualatex", "luatex", "groff", "gs"}},
}

// multiCall programs choose what to be by the name they are started as: a link to one
// runs the applet the link is named after, which the name check has already judged.
var multiCall = []string{"busybox", "toybox"}

// programRisk is why a program may not simply be listed.
type programRisk struct {
	anyCommand bool   // a shell or launcher: refused even with allow_code_execution
	why        string // for a code runner: what it runs
}

// riskOf judges a program by its base name, ignoring case, a Windows extension and a
// version suffix (python3.12, perl5.36, gawk-5.1 and clang-17 are python, perl, gawk
// and clang).
func riskOf(program string) (programRisk, bool) {
	base := strings.ToLower(filepath.Base(program))
	for _, ext := range []string{".exe", ".cmd", ".bat", ".com"} {
		base = strings.TrimSuffix(base, ext)
	}
	names := []string{base}
	if i := strings.IndexAny(base, "0123456789.-_"); i > 0 {
		names = append(names, base[:i])
	}
	// A cross tool's target prefix (x86_64-linux-gnu-gcc-12): judge what follows
	// each dash too, without its own version suffix.
	for rest := base; strings.Contains(rest, "-"); {
		rest = rest[strings.Index(rest, "-")+1:]
		names = append(names, rest)
		if i := strings.IndexAny(rest, "0123456789.-_"); i > 0 {
			names = append(names, rest[:i])
		}
	}
	for _, n := range names {
		if spec.IsShell(n) || slices.Contains(launchers, n) {
			return programRisk{anyCommand: true}, true
		}
	}
	for _, n := range names {
		for _, g := range codeRunners {
			if slices.Contains(g.names, n) {
				return programRisk{why: g.why}, true
			}
		}
	}
	return programRisk{}, false
}

// resolvedRisk judges the file a listed name starts when it is a link to another
// program (py → python3.12, a renamed awk), so a harmless-looking name does not hide a
// code runner. path is what exec.LookPath found; "" means to look it up.
func resolvedRisk(program, path string) (target string, risk programRisk, risky bool) {
	if path == "" {
		p, err := exec.LookPath(program)
		if err != nil {
			return "", programRisk{}, false // not installed here: nothing runs
		}
		path = p
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil || filepath.Base(real) == filepath.Base(path) {
		return "", programRisk{}, false
	}
	if slices.Contains(multiCall, strings.ToLower(filepath.Base(real))) {
		return "", programRisk{}, false
	}
	risk, risky = riskOf(real)
	return real, risk, risky
}
