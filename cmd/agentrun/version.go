package main

import (
	"cmp"
	"fmt"
	"net/url"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

// version is what a release build stamps in with -ldflags "-X main.version=v1.2.0";
// empty, the module's version (from go install …@v1.2.0) or (devel) is shown.
var version string

func newVersionCommand() *cobra.Command {
	var paths bool
	cmd := &cobra.Command{
		Use:   "version [--paths [SPEC]]",
		Short: "Print agentrun's version, the commit it was built from and the Go version",
		Long: "Print agentrun's version, the commit it was built from and the Go version. With --paths,\n" +
			"print instead where the state of SPEC's runs is (or, without SPEC, of the working\n" +
			"directory's project): the memory store, which keeps memory and paused runs, and the\n" +
			"knowledge index, which keeps learned answers. Both default to .agentrun/ in the spec's\n" +
			"project directory, whatever folder a command runs from.",
		Args: func(cmd *cobra.Command, args []string) error {
			if paths {
				return cobra.MaximumNArgs(1)(cmd, args)
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if paths {
				return printPaths(cmd, args)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildVersion())
			return err
		},
	}
	cmd.Flags().BoolVar(&paths, "paths", false, "print where the memory store and the knowledge index are")
	return cmd
}

// printPaths prints the store and the index a run of the spec in args (if any) uses
// by default, with a password in a URL masked.
func printPaths(cmd *cobra.Command, args []string) error {
	s := &spec.Spec{}
	if len(args) > 0 {
		var err error
		if s, err = loadSpec(cmd, args[0]); err != nil {
			return err
		}
	}
	store, err := agentrun.StoreURL("", s.Memory, s.Pos.File, nil)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "memory store     %s\nknowledge index  %s\n", redactURL(store), redactURL(agentrun.IndexPath(s, nil)))
	return err
}

// redactURL masks the password of a URL; a path stays as it is.
func redactURL(location string) string {
	if u, err := url.Parse(location); err == nil && u.User != nil {
		return u.Redacted()
	}
	return location
}

// buildVersion is the version line of this binary.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok { // a binary built without module support: only the toolchain is known
		info = &debug.BuildInfo{GoVersion: goruntime.Version()}
	}
	return versionLine(info, version)
}

// versionLine formats what the build recorded, e.g.
// "agentrun (devel) · rev 0123abcd4567+dirty (2026-11-30T09:00:00Z) · go1.26.8".
// The revision part is left out when the build recorded no VCS information
// (go run, -buildvcs=false, a build outside a checkout). stamped, the version
// -ldflags -X set, wins over the module's.
func versionLine(info *debug.BuildInfo, stamped string) string {
	v := cmp.Or(stamped, info.Main.Version, "(devel)") // a test binary records no main module version
	parts := []string{"agentrun " + v}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		// Twelve hex digits, as in Go's pseudo-versions: unique in practice, short to read.
		rev = "rev " + rev[:min(len(rev), 12)]
		if settings["vcs.modified"] == "true" {
			rev += "+dirty"
		}
		if t := settings["vcs.time"]; t != "" {
			rev += " (" + t + ")"
		}
		parts = append(parts, rev)
	}
	if info.GoVersion != "" {
		parts = append(parts, info.GoVersion)
	}
	return strings.Join(parts, " · ")
}
