package skills

import (
	"embed"
	"io/fs"
)

//go:embed all:bundled
var bundled embed.FS

// Bundled is the library of skills built into agentrun: one directory per skill,
// each with its skill.yaml and README.md.
func Bundled() fs.FS {
	sub, err := fs.Sub(bundled, "bundled")
	if err != nil {
		panic(err) // the directory is embedded above: it exists
	}
	return sub
}
