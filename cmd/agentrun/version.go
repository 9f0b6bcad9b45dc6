package main

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print agentrun's version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildVersion())
			return err
		},
	}
}

// buildVersion is the version line of this binary.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok { // a binary built without module support: only the toolchain is known
		info = &debug.BuildInfo{GoVersion: goruntime.Version()}
	}
	return versionLine(info)
}

// versionLine formats what the build recorded, e.g.
// "agentrun (devel) · rev 0123abcd4567+dirty (2026-11-30T09:00:00Z) · go1.26.8".
// The revision part is left out when the build recorded no VCS information
// (go run, -buildvcs=false, a build outside a checkout).
func versionLine(info *debug.BuildInfo) string {
	version := info.Main.Version
	if version == "" { // a test binary records no main module version
		version = "(devel)"
	}
	parts := []string{"agentrun " + version}
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
