package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newIndexCommand() *cobra.Command {
	var rebuild, offline bool
	cmd := &cobra.Command{
		Use:   "index SPEC...",
		Short: "Build or update the knowledge index of agents' collections",
		Long: "Read the sources of every collection under knowledge.collections, split them into\n" +
			"chunks and embed the chunks the index lacks; chunks whose sources are gone are\n" +
			"deleted. Running it again on unchanged sources embeds nothing. A collection indexed\n" +
			"by another embedder (the embeddings section changed) is rebuilt. The index is\n" +
			"AGENTRUN_INDEX, else knowledge.index (relative to the spec), else " + spec.DefaultIndexPath + "\n" +
			"(relative to the working directory). exec and serve index stale collections\n" +
			"themselves, but never rebuild one: that is this command's job.\n\n" +
			"--offline uses the built-in local embedder, as runs with --model test do, under\n" +
			"separate collection names, so the real index is left alone.",
		Example: "  agentrun index examples/agents/shop-support.yaml\n" +
			"  agentrun index --rebuild agents/*.yaml",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runIndex(cmd, args, rebuild, offline)
		},
	}
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "embed every chunk again")
	cmd.Flags().BoolVar(&offline, "offline", false, "use the local embedder (as --model test runs do)")
	return cmd
}

func runIndex(cmd *cobra.Command, paths []string, rebuild, offline bool) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var total indexTotals
	failed := false
	for _, path := range paths {
		s, err := loadSpec(cmd, path)
		if err != nil {
			if _, ok := err.(exitError); !ok {
				fmt.Fprintf(errOut, "agentrun: %v\n", err)
			}
			failed = true
			continue
		}
		if len(s.Knowledge.Collections) == 0 {
			fmt.Fprintf(out, "%s: no knowledge collections\n", s.Name)
			continue
		}
		bar := &indexProgress{w: errOut, tty: isTerminal(errOut)}
		dir := filepath.Dir(path)
		_, err = agentrun.IndexSpec(cmd.Context(), s, agentrun.IndexOptions{
			Rebuild:  rebuild,
			Offline:  offline,
			Progress: bar.update,
			Done: func(r agentrun.CollectionReport) {
				bar.clear()
				writeWarnings(errOut, dir, r.Warnings)
				fmt.Fprintf(out, "%s: %s\n", r.Collection, r.Summary())
				total.add(r)
			},
		})
		bar.clear()
		if err != nil {
			fmt.Fprintf(errOut, "agentrun: %s: %v\n", path, err)
			failed = true
			continue
		}
		total.agents++
	}
	if total.agents > 0 && (len(paths) > 1 || total.collections > 1) {
		fmt.Fprintf(out, "total: %s of %s, %s, %s — %d embedded, %d kept, %d deleted (%s) in %s\n",
			count(total.collections, "collection"), count(total.agents, "agent"), count(total.files, "file"),
			count(total.chunks, "chunk"), total.embedded, total.kept, total.deleted, count(total.vectors, "vector"), round(total.took))
	}
	if failed {
		return exitError{1}
	}
	return nil
}

type indexTotals struct {
	agents, collections, files, chunks, embedded, kept, deleted, vectors int
	took                                                                 time.Duration
}

func (t *indexTotals) add(r agentrun.CollectionReport) {
	t.collections++
	t.files += r.Files
	t.chunks += r.Chunks
	t.embedded += r.Embedded
	t.kept += r.Kept
	t.deleted += r.Deleted
	t.vectors += r.Vectors
	t.took += r.Duration
}

// writeWarnings prints source warnings like validate does, their files relative to
// the working directory (they come relative to the spec's directory).
func writeWarnings(w io.Writer, specDir string, ds spec.Diagnostics) {
	for _, d := range ds {
		if d.Pos.File != "" && !filepath.IsAbs(d.Pos.File) {
			d.Pos.File = filepath.Join(specDir, filepath.FromSlash(d.Pos.File))
		}
		fmt.Fprint(w, formatDiagnostics(spec.Diagnostics{d}))
	}
}

// indexProgress shows embedding progress: on a terminal a bar redrawn in place
// ("help  [=======>      ] 120/400"), elsewhere one line when a collection starts
// embedding (the summary line ends it).
type indexProgress struct {
	w     io.Writer
	tty   bool
	drawn bool
}

const barWidth = 30

func (p *indexProgress) update(collection string, done, total int) {
	if total == 0 {
		return
	}
	if !p.tty {
		if done == 0 {
			fmt.Fprintf(p.w, "%s: embedding %s…\n", collection, count(total, "text"))
		}
		return
	}
	filled := barWidth * done / total
	bar := strings.Repeat("=", filled)
	if filled < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-filled-1)
	}
	fmt.Fprintf(p.w, "\r%s  [%s] %d/%d", collection, bar, done, total)
	p.drawn = true
}

// clear erases the bar before a line is printed.
func (p *indexProgress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
