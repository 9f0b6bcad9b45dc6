package agentrun

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentrun/agentrun/spec"
)

// StateDir is the directory, in a spec's project directory (ProjectDir), that holds
// its state when nothing names another place: the store and the knowledge index.
const StateDir = ".agentrun"

// DefaultStoreURL is where runs remember when nothing says otherwise: a SQLite file
// in the state directory, relative to the spec's project directory (ProjectDir).
const DefaultStoreURL = "sqlite:" + StateDir + "/state.db"

// ProjectDir is the directory whose .agentrun/ holds the state of the spec in
// specFile ("" for a command without a spec: the working directory's). Inside a
// repository (up to the directory with .git) it is the nearest directory from the
// spec's own upwards that has a .agentrun/ already; else, and outside a repository,
// the spec's own directory. So memory, paused runs and learned answers stay the same
// from whichever folder a command runs, the specs of one project can share them, and
// a stray .agentrun/ in /tmp or a home directory captures nothing. The path is absolute.
func ProjectDir(specFile string) string {
	start := "."
	if specFile != "" {
		start = filepath.Dir(specFile)
	}
	start, err := filepath.Abs(start)
	if err != nil {
		return filepath.Dir(specFile)
	}
	found := ""
	for dir := start; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, StateDir)); err == nil && fi.IsDir() && found == "" {
			found = dir
		}
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil && found != "" {
			return found
		} else if err == nil || filepath.Dir(dir) == dir {
			return start
		}
	}
}

// StoreURL picks the store: the --store flag, then AGENTRUN_STORE (read through
// lookup; nil means the process environment), then the spec's memory.url, then its
// memory.store kind with its default place, in the project directory of specFile
// ("" when there is no spec).
func StoreURL(flag string, m spec.Memory, specFile string, lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env, _ := lookup("AGENTRUN_STORE")
	switch {
	case flag != "":
		return flag, nil
	case env != "":
		return env, nil
	case m.URL != "":
		return m.URL, nil
	}
	switch m.Store {
	case spec.StoreMemory:
		return "memory:", nil
	case spec.StoreRedis, spec.StorePostgres:
		return "", fmt.Errorf("memory.store is %s but no URL is given: set memory.url, AGENTRUN_STORE or --store", m.Store)
	}
	return "sqlite:" + filepath.Join(ProjectDir(specFile), StateDir, "state.db"), nil
}

// NeedsStore reports whether every run of this spec reads or writes memory: facts
// to write, an intent that injects memory, or a tool whose calls may wait for
// approval (the paused run is kept in the store). Continuing a conversation needs
// one too (Options.Remember).
func NeedsStore(s *spec.Spec) bool {
	if len(s.Memory.Facts.FromTools) > 0 || s.Memory.Facts.Extract == spec.ExtractLLM || NeedsApproval(s) {
		return true
	}
	if slices.ContainsFunc(s.Intents, func(in spec.Intent) bool { return in.Memory.Injects() }) {
		return true
	}
	// A sub-agent's runs read the store and the parent commits what they wrote.
	return slices.ContainsFunc(s.Agents, func(a spec.SubAgent) bool { return a.Loaded != nil && NeedsStore(a.Loaded) })
}

// NeedsApproval reports whether some tool of the spec (its own or a skill's) may
// wait for a person's approval.
func NeedsApproval(s *spec.Spec) bool { return s.NeedsApproval() }
