package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commands is every command under the root, the root included.
func commands(root *cobra.Command) []*cobra.Command {
	all := []*cobra.Command{root}
	for _, c := range root.Commands() {
		all = append(all, commands(c)...)
	}
	return all
}

// A back-quoted word in a flag's usage becomes its placeholder in --help: once
// "`agentrun worker`" made the help read "--engine agentrun worker".
func TestExecAndEveryFlagHaveOnePlaceholderWord(t *testing.T) {
	root := newRootCommand(strings.NewReader(""), os.Stdout, os.Stderr)
	for _, c := range commands(root) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s shows the placeholder %q", c.CommandPath(), f.Name, name)
			}
		})
	}
	code, stdout, _ := runCLI(t, "exec", "--help")
	if code != 0 || !strings.Contains(stdout, "--engine ENGINE") {
		t.Errorf("exec --help: exit %d\n%s", code, stdout)
	}
}

// The examples of every command's help name files that exist: once index's named
// examples/agents/help-desk.yaml, which does not.
func TestIndexAndEveryExampleNameFilesThatExist(t *testing.T) {
	root := newRootCommand(strings.NewReader(""), os.Stdout, os.Stderr)
	path := regexp.MustCompile(`examples/[^\s"']+\.ya?ml`)
	seen := 0
	for _, c := range commands(root) {
		for _, p := range path.FindAllString(c.Example+"\n"+c.Long, -1) {
			seen++
			if _, err := os.Stat(filepath.Join("..", "..", p)); err != nil {
				t.Errorf("%s --help names %s: %v", c.CommandPath(), p, err)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no example names a file: the pattern is wrong")
	}
}
