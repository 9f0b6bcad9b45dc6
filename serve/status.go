package serve

import (
	"bufio"
	"errors"
	"net/http"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/agentrun/agentrun/spec"
)

// loadStatus is what became of the server's last load of its specs.
type loadStatus struct {
	mu       sync.Mutex
	loaded   time.Time // when the agents served were loaded
	checked  time.Time // when a load was last tried
	err      error     // the last try's problem; nil when it loaded
	attempts int
	// shown are err's diagnostics with their source lines, read once per try.
	shown []statusDiagnostic
}

func (l *loadStatus) record(err error, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked, l.err, l.shown = at, err, nil
	l.attempts++
	if err == nil {
		l.loaded = at
	}
}

// statusView is the body of GET /v1/status.
type statusView struct {
	OK bool `json:"ok"`
	// Mode is "dev" for `agentrun dev`, else "serve".
	Mode      string    `json:"mode"`
	LoadedAt  time.Time `json:"loaded_at"`
	CheckedAt time.Time `json:"checked_at"`
	// Reloads counts the loads tried after the first.
	Reloads int      `json:"reloads"`
	Agents  []string `json:"agents"`
	// Error says why the last reload failed: the agents served are those loaded
	// before. In dev mode it is the error itself, with the diagnostics of the specs.
	Error       string             `json:"error,omitempty"`
	Diagnostics []statusDiagnostic `json:"diagnostics,omitempty"`
}

// statusDiagnostic is a spec's diagnostic with the line of the file it is about.
type statusDiagnostic struct {
	spec.FlatDiagnostic
	Source string `json:"source,omitempty"`
}

// maxSourceLine bounds the source line shown with a diagnostic.
const maxSourceLine = 1 << 10

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request, p Principal) {
	l := &s.status
	l.mu.Lock()
	v := statusView{OK: l.err == nil, Mode: "serve", LoadedAt: l.loaded, CheckedAt: l.checked, Reloads: l.attempts - 1}
	err := l.err
	var diags spec.Diagnostics
	if s.opts.Dev && errors.As(err, &diags) {
		if l.shown == nil {
			l.shown = withSource(diags)
		}
		v.Diagnostics = l.shown
	}
	l.mu.Unlock()
	v.Agents = s.agentNames()
	if s.opts.Dev {
		v.Mode = "dev"
	}
	switch {
	case err == nil:
	case !s.opts.Dev:
		// Only the operator sees why: the specs' paths and lines are not the users'.
		v.Error = "the last reload failed: the agents loaded before are served (see the server's log)"
	case v.Diagnostics != nil:
		v.Error = "the specs have errors: the agents loaded before are served"
	default:
		v.Error = withoutPasswords(err.Error())
	}
	writeJSON(w, http.StatusOK, v)
}

// withSource flattens diags, each with the line of its file it points at.
func withSource(diags spec.Diagnostics) []statusDiagnostic {
	out := make([]statusDiagnostic, 0, len(diags))
	lines := map[string][]string{}
	for _, d := range diags {
		sd := statusDiagnostic{FlatDiagnostic: d.Flat()}
		if f := d.Pos.File; f != "" && d.Pos.Line > 0 {
			if _, read := lines[f]; !read {
				lines[f] = readLines(f)
			}
			if ls := lines[f]; d.Pos.Line <= len(ls) {
				sd.Source = ls[d.Pos.Line-1]
			}
		}
		out = append(out, sd)
	}
	return out
}

// readLines is a file's lines, each cut at maxSourceLine bytes; nil when it
// cannot be read.
func readLines(file string) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > maxSourceLine {
			line = line[:maxSourceLine]
		}
		out = append(out, line)
	}
	return out
}

// urlPassword is the user and password of a URL in a text (a store's DSN).
var urlPassword = regexp.MustCompile(`://[^/@\s:]*:[^/@\s]*@`)

// withoutPasswords is text with the passwords of the URLs in it left out.
func withoutPasswords(text string) string { return urlPassword.ReplaceAllString(text, "://…@") }
