package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/serve"
	"github.com/agentrun/agentrun/spec"
)

// devDebounce is how long dev waits after the last change of a burst (an editor's
// save is often a write, a rename and a chmod) before it reloads.
const devDebounce = 200 * time.Millisecond

// devFlags are agentrun dev's flags.
type devFlags struct {
	addr, store, model, index string
	verbose                   bool
}

func newDevCommand() *cobra.Command {
	var fl devFlags
	cmd := &cobra.Command{
		Use:   "dev [flags] SPEC|DIR...",
		Short: "Serve agents on this machine with the web console, reloading them when their files change",
		Long: "Serve agents for development: the serve API and the web console (under /ui/) on a\n" +
			"loopback address, without authentication. A request is the user its\n" +
			"X-Agentrun-User header names (default \"dev\"), with the attributes of its\n" +
			"X-Agentrun-Attributes header (a JSON object of strings) and the roles of\n" +
			"X-Agentrun-Roles: the console lets you choose them. Any address that is not\n" +
			"loopback is refused.\n\n" +
			"dev prints the console's URL and opens nothing. It watches every file the agents\n" +
			"are made of (their specs, skills, knowledge sources, model scripts and\n" +
			"sub-agents' specs) and new specs in the directories given; after a change it\n" +
			"reloads them all. A spec that no longer loads is reported here and on the\n" +
			"console's page (GET /v1/status), and the agents loaded before go on serving.\n" +
			"SIGHUP reloads too; SIGINT and SIGTERM stop it. See docs/dev.md.",
		Example: "  agentrun dev examples/agents\n" +
			"  agentrun dev --model test --addr 127.0.0.1:0 examples/agents/shop-support.yaml",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDev(cmd.Context(), cmd.ErrOrStderr(), args, fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.addr, "addr", serve.DefaultAddr, "the loopback address to listen on (port 0 picks a free one)")
	f.StringVar(&fl.store, "store", "", "the memory store's URL for every agent (default: AGENTRUN_STORE, else the first spec's memory.url, else .agentrun/state.db)")
	f.StringVar(&fl.model, "model", "", "override every spec's model: test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]")
	f.StringVar(&fl.index, "index", "", "the knowledge index file (default: AGENTRUN_INDEX, else knowledge.index, else .agentrun/knowledge.db)")
	f.BoolVarP(&fl.verbose, "verbose", "v", false, "log every request, as serve does")
	return cmd
}

func runDev(ctx context.Context, errOut io.Writer, args []string, fl devFlags) error {
	errOut = &lockedWriter{w: errOut} // the watcher and the server write to it at once
	if !serve.IsLoopback(fl.addr) {
		fmt.Fprintf(errOut, "agentrun dev: refusing --addr %s: dev serves without authentication, so only on a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)\n", fl.addr)
		return exitError{2}
	}
	cfg, err := serve.LoadConfig("")
	if err != nil {
		return err
	}
	cfg.Addr = fl.addr
	level := slog.LevelWarn
	if fl.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: level}))
	srv, err := serve.New(ctx, serve.Options{Config: cfg, Specs: args, Store: fl.store, Model: fl.model, Index: fl.index,
		Dev: true, UI: true, Logger: logger})
	if diags, ok := errors.AsType[spec.Diagnostics](err); ok {
		fmt.Fprint(errOut, formatDiagnostics(diags))
		return exitError{1}
	}
	if err != nil {
		fmt.Fprintf(errOut, "agentrun dev: %v\n", err)
		return exitError{1}
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintf(errOut, "agentrun dev: %v\n", err)
		return exitError{1}
	}
	if !serve.IsLoopback(ln.Addr().String()) { // localhost resolved elsewhere
		ln.Close()
		fmt.Fprintf(errOut, "agentrun dev: refusing %s: it listens on %s, not a loopback address\n", cfg.Addr, ln.Addr())
		return exitError{2}
	}
	w, err := newDevWatcher(srv, args, fl.index, errOut)
	if err != nil {
		ln.Close()
		fmt.Fprintf(errOut, "agentrun dev: watching the specs: %v\n", err)
		return exitError{1}
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(wctx)
	}()
	defer func() {
		stop()
		<-done
		w.fs.Close()
	}()
	// Printed once the files are watched: whoever reads the URL may edit at once.
	fmt.Fprintf(errOut, "agentrun dev: console at http://%s/ui/\n", ln.Addr())
	return serveUntilSignal(ctx, srv, ln, cfg, logger, w.reload)
}

// devWatcher reloads the server when a file its agents are made of changes.
// fsnotify watches directories, not files: an editor that saves by writing a
// new file and renaming it over the old one replaces the file a watch would
// follow. Events are kept to the files listed and to new specs in the spec
// directories given.
type devWatcher struct {
	srv *serve.Server
	fs  *fsnotify.Watcher
	out io.Writer
	// specDirs are the directory arguments: a new *.yaml in one is a new spec.
	specDirs map[string]bool
	ignore   string // the knowledge index, which a reload may write

	reloadMu sync.Mutex // one reload at a time: the watcher's and SIGHUP's
	failed   []string   // the files the last failed reload's diagnostics name

	mu    sync.Mutex
	files map[string]bool // the files watched
	dirs  map[string]bool // the directories watched as a whole (spec dirs, knowledge globs' dirs)
}

func newDevWatcher(srv *serve.Server, args []string, index string, out io.Writer) (*devWatcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &devWatcher{srv: srv, fs: fsw, out: out, specDirs: map[string]bool{}}
	for _, a := range args {
		if info, err := os.Stat(a); err == nil && info.IsDir() {
			if abs, err := filepath.Abs(a); err == nil {
				w.specDirs[abs] = true
			}
		}
	}
	if index != "" {
		w.ignore, _ = filepath.Abs(index)
	}
	w.sync()
	return w, nil
}

func (w *devWatcher) run(ctx context.Context) {
	timer := time.NewTimer(devDebounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if w.newDir(ev) {
				w.sync() // it may hold a file listed
			}
			if w.relevant(ev) {
				timer.Reset(devDebounce)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			fmt.Fprintf(w.out, "agentrun dev: watching the specs: %v\n", err)
		case <-timer.C:
			w.reload(ctx)
		}
	}
}

// reload reloads the server, says how it went, and watches what the agents are
// made of now.
func (w *devWatcher) reload(ctx context.Context) {
	w.reloadMu.Lock()
	defer w.reloadMu.Unlock()
	err := w.srv.Reload(ctx)
	w.failed = nil
	switch diags, ok := errors.AsType[spec.Diagnostics](err); {
	case err == nil:
		fmt.Fprintln(w.out, "agentrun dev: reloaded")
	case ok:
		w.failed = diagnosticFiles(diags)
		fmt.Fprint(w.out, formatDiagnostics(diags)+"agentrun dev: kept the agents loaded before\n")
	default:
		fmt.Fprintf(w.out, "agentrun dev: %v\nagentrun dev: kept the agents loaded before\n", err)
	}
	w.syncLocked()
}

// diagnosticFiles are the files diagnostics point into: where the fix will be
// made, even in a file the agents served do not use yet (a skill just added).
func diagnosticFiles(ds spec.Diagnostics) []string {
	var files []string
	add := func(f string) {
		if f == "" || strings.HasPrefix(f, spec.BundledPrefix) {
			return
		}
		if abs, err := filepath.Abs(f); err == nil {
			files = append(files, abs)
		}
	}
	for _, d := range ds {
		add(d.Pos.File)
		for _, n := range d.Notes {
			add(n.Pos.File)
		}
	}
	return files
}

// sync watches the directories of what the server's agents are made of now (and
// of the files the last failed reload named), and no others.
func (w *devWatcher) sync() {
	w.reloadMu.Lock()
	defer w.reloadMu.Unlock()
	w.syncLocked()
}

// syncLocked is sync with reloadMu held.
func (w *devWatcher) syncLocked() {
	files, dirs, want := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range append(w.srv.Files(), w.failed...) {
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			dirs[p], want[p] = true, true
		} else {
			files[p], want[filepath.Dir(p)] = true, true
		}
	}
	watched := w.fs.WatchList()
	for _, d := range watched {
		if !want[d] {
			w.fs.Remove(d)
		}
	}
	for d := range want {
		if !slices.Contains(watched, d) {
			w.fs.Add(d) // a directory that does not exist yet is watched once a sync finds it
		}
	}
	w.mu.Lock()
	w.files, w.dirs = files, dirs
	w.mu.Unlock()
}

// newDir reports whether ev made a directory in a watched one.
func (w *devWatcher) newDir(ev fsnotify.Event) bool {
	if !ev.Has(fsnotify.Create) {
		return false
	}
	info, err := os.Stat(ev.Name)
	return err == nil && info.IsDir()
}

// relevant reports whether ev changes what the agents are made of: a file listed
// changed, appeared or went, or a file appeared in a directory watched as a whole
// (a spec in a spec directory, any file in a knowledge glob's directory).
func (w *devWatcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := filepath.Clean(ev.Name)
	if name == w.ignore {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.files[name] {
		return true
	}
	if scratchFile(filepath.Base(name)) {
		return false
	}
	for dir := range w.dirs {
		if !within(dir, name) {
			continue
		}
		if !w.specDirs[dir] {
			return true
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			return true
		}
	}
	return false
}

// scratchFile reports whether name is an editor's or a database's scratch file:
// hidden, a backup, a swap file, vim's write test, SQLite's journal.
func scratchFile(name string) bool {
	for _, suffix := range []string{"~", ".swp", ".swx", ".tmp", "-journal", "-wal", "-shm"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") || name == "4913"
}

// within reports whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// lockedWriter lets goroutines write to one writer, a line at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
