package console_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/console"
)

// Every file of the console is served under /ui/ with the content policy and
// its type; the page itself at /ui/.
func TestHandlerServesEveryFile(t *testing.T) {
	h := console.Handler()
	types := map[string]string{".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
	err := fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		url := console.Prefix + p
		if p == "index.html" {
			url = console.Prefix
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d", url, rec.Code)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", url, csp)
		}
		if want := types[path.Ext(p)]; !strings.HasPrefix(rec.Header().Get("Content-Type"), want) {
			t.Errorf("GET %s: Content-Type %q, want %s", url, rec.Header().Get("Content-Type"), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The pages keep to what the content policy allows and to the rule that text
// from the server is never parsed as HTML: no inline scripts, styles or event
// handlers, no URL of another origin, no innerHTML; and every module they
// import is there.
func TestStaticFilesKeepTheRules(t *testing.T) {
	forbidden := map[string]*regexp.Regexp{
		".html": regexp.MustCompile(`<script>|<script [^>]*>[^<]|\sstyle=|\son[a-z]+=|<style`),
		".js":   regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|setAttribute\("style"`),
	}
	external := regexp.MustCompile(`(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	imports := regexp.MustCompile(`(?m)(?:from|import)\s+"(\./[^"]+)"`)
	err := fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile("static/" + p)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(data), `"http://www.w3.org/2000/svg"`, "") // a namespace's name, never fetched
		if re := forbidden[path.Ext(p)]; re != nil {
			if m := re.FindString(text); m != "" {
				t.Errorf("%s has %q", p, m)
			}
		}
		if m := external.FindString(text); m != "" {
			t.Errorf("%s names another origin: %q", p, m)
		}
		for _, m := range imports.FindAllStringSubmatch(text, -1) {
			if _, err := os.Stat("static/" + path.Join(path.Dir(p), m[1])); err != nil {
				t.Errorf("%s imports %s: %v", p, m[1], err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
