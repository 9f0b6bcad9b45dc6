package spec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// checkCommandProgram warns when a command tool's program cannot be found, where the
// tool would look for it: a path (it has a separator) relative to the spec's
// directory, a bare name on PATH. Only a warning: the program may be built or
// installed before the agent runs, but a spec tried on a fresh clone should say so
// at validate rather than fail at the first call.
func (c *checker) checkCommandProgram(run []string, idx string) {
	if len(run) == 0 || run[0] == "" {
		return
	}
	program := run[0]
	at := c.at("tools", idx, "command", "run", "0")
	if !strings.ContainsRune(program, filepath.Separator) {
		if _, err := exec.LookPath(program); err != nil {
			c.warnf(at, "install it, or give its path relative to the spec", "program %q is not on PATH", program)
		}
		return
	}
	if strings.HasPrefix(c.file, BundledPrefix) {
		return // a bundled skill's directory is not on disk
	}
	path := program
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(c.file), path)
	}
	if info, err := os.Stat(path); err != nil || info.IsDir() {
		c.warnf(at, "build or install it there, or correct the path (a relative path starts from the spec's directory)", "program %s is not found at %s", program, path)
	}
}
