package builtin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"file.txt": "x", "docs/": ""})
	tests := []struct {
		name    string
		builtin string
		with    map[string]any
		want    []string // substrings of the error
	}{
		{"unknown key names it and lists the allowed", "read_file", map[string]any{"rot": "."},
			[]string{`unknown key "rot"`, `did you mean "root"?`, "read_file takes max_bytes, root"}},
		{"unknown key without a near match", "list_dir", map[string]any{"colour": "red"},
			[]string{`unknown key "colour"`, "list_dir takes max_entries, root"}},
		{"calculator takes no configuration", "calculator", map[string]any{"precision": 3},
			[]string{`unknown key "precision"`, "calculator takes no configuration"}},
		{"every problem is reported", "read_file", map[string]any{"max_bytes": "64k", "follow": true},
			[]string{`unknown key "follow"`, `with.max_bytes must be an integer, not the string "64k"`}},
		{"integer field refuses a fraction", "list_dir", map[string]any{"max_entries": 2.5},
			[]string{"with.max_entries must be an integer, not the number 2.5"}},
		{"string field refuses a number", "read_file", map[string]any{"root": 7},
			[]string{"with.root must be a string, not the number 7"}},
		{"list field refuses a string", "http_get", map[string]any{"allow_hosts": "example.com"},
			[]string{`with.allow_hosts must be a list of strings, not the string "example.com"`}},
		{"list field refuses non-string items", "http_get", map[string]any{"allow_hosts": []any{"a.com", 3}},
			[]string{"with.allow_hosts must be a list of strings"}},
		{"max_bytes must be positive", "read_file", map[string]any{"max_bytes": 0},
			[]string{"with.max_bytes must be at least 1, not 0"}},
		{"root that does not exist", "read_file", map[string]any{"root": "missing"},
			[]string{`with.root: directory "missing" does not exist`}},
		{"root that is a file", "list_dir", map[string]any{"root": "file.txt"},
			[]string{"is not a directory"}},
		{"empty root", "read_file", map[string]any{"root": ""},
			[]string{"with.root must not be empty"}},
		{"write_file without root", "write_file", nil,
			[]string{"write_file needs with.root", "no default"}},
		{"write_file with only max_bytes", "write_file", map[string]any{"max_bytes": 10},
			[]string{"write_file needs with.root"}},
		{"write_file with a null root", "write_file", map[string]any{"root": nil},
			[]string{"write_file needs with.root"}},
		{"write_file root that does not exist", "write_file", map[string]any{"root": "out"},
			[]string{"does not exist"}},
		{"http_get without allow_hosts", "http_get", nil,
			[]string{"http_get needs with.allow_hosts"}},
		{"http_get with an empty allow list", "http_get", map[string]any{"allow_hosts": []any{}},
			[]string{"http_get needs with.allow_hosts"}},
		{"http_get refuses a bare wildcard", "http_get", map[string]any{"allow_hosts": []any{"*"}},
			[]string{`with.allow_hosts[0]: "*" allows every host`}},
		{"http_get refuses a URL as host", "http_get", map[string]any{"allow_hosts": []any{"ok.com", "https://api.example.com/v1"}},
			[]string{"with.allow_hosts[1]", "is not a host name"}},
		{"http_get refuses a port", "http_get", map[string]any{"allow_hosts": []any{"example.com:8080"}},
			[]string{"has a port"}},
		{"http_get refuses a wildcard inside", "http_get", map[string]any{"allow_hosts": []any{"api.*.com"}},
			[]string{"only allowed as the first label"}},
		{"http_get bad timeout", "http_get", map[string]any{"allow_hosts": []any{"a.com"}, "timeout": "10"},
			[]string{`with.timeout "10" is not a duration`}},
		{"http_get negative timeout", "http_get", map[string]any{"allow_hosts": []any{"a.com"}, "timeout": "-1s"},
			[]string{"with.timeout must be positive"}},
		{"http_get timeout must be a string", "http_get", map[string]any{"allow_hosts": []any{"a.com"}, "timeout": 10},
			[]string{"with.timeout must be a string, not the number 10"}},
		{"current_time unknown zone", "current_time", map[string]any{"timezone": "Mars/Olympus"},
			[]string{`with.timezone: unknown time zone "Mars/Olympus"`}},
		{"current_time refuses Local", "current_time", map[string]any{"timezone": "Local"},
			[]string{`"Local" is not an IANA time zone name`}},
		{"current_time wrong key", "current_time", map[string]any{"tz": "UTC"},
			[]string{`unknown key "tz"`, "current_time takes timezone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := build(t, tt.builtin, tt.with, dir)
			if tool != nil {
				t.Errorf("got a tool despite the error")
			}
			wantErrContains(t, err, tt.want...)
		})
	}
}

func TestConfigAccepted(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"docs/a.txt": "a\n"})
	tests := []struct {
		name    string
		builtin string
		with    map[string]any
		check   func(t *testing.T, tool any)
	}{
		{"defaults", "read_file", nil, func(t *testing.T, tool any) {
			r := tool.(*readFile)
			if r.maxBytes != 65536 || r.root != dir {
				t.Errorf("got root %q max_bytes %d, want %q and 65536", r.root, r.maxBytes, dir)
			}
		}},
		{"relative root resolves against the spec directory", "read_file", map[string]any{"root": "docs"}, func(t *testing.T, tool any) {
			if got := tool.(*readFile).root; got != filepath.Join(dir, "docs") {
				t.Errorf("root = %q", got)
			}
		}},
		{"null keeps the default", "list_dir", map[string]any{"max_entries": nil}, func(t *testing.T, tool any) {
			if got := tool.(*listDir).maxEntries; got != 500 {
				t.Errorf("max_entries = %d, want 500", got)
			}
		}},
		{"integers decoded from JSON", "list_dir", map[string]any{"max_entries": float64(20)}, func(t *testing.T, tool any) {
			if got := tool.(*listDir).maxEntries; got != 20 {
				t.Errorf("max_entries = %d, want 20", got)
			}
		}},
		{"json.Number integers", "read_file", map[string]any{"max_bytes": json.Number("100")}, func(t *testing.T, tool any) {
			if got := tool.(*readFile).maxBytes; got != 100 {
				t.Errorf("max_bytes = %d, want 100", got)
			}
		}},
		{"write_file defaults", "write_file", map[string]any{"root": "."}, func(t *testing.T, tool any) {
			if got := tool.(*writeFile).maxBytes; got != 1<<20 {
				t.Errorf("max_bytes = %d, want 1 MiB", got)
			}
		}},
		{"http_get defaults and host rules", "http_get", map[string]any{"allow_hosts": []string{"API.Example.com.", "*.example.org", "[::1]"}}, func(t *testing.T, tool any) {
			h := tool.(*httpGet)
			if h.maxBytes != 256<<10 || h.timeout.String() != "10s" || h.client.Timeout != h.timeout {
				t.Errorf("max_bytes %d timeout %s client timeout %s", h.maxBytes, h.timeout, h.client.Timeout)
			}
			var got []string
			for _, r := range h.allow {
				got = append(got, r.String())
			}
			if strings.Join(got, " ") != "api.example.com *.example.org ::1" {
				t.Errorf("allow = %v", got)
			}
		}},
		{"current_time zone", "current_time", map[string]any{"timezone": "Asia/Tokyo"}, func(t *testing.T, tool any) {
			if got := tool.(*currentTime).loc.String(); got != "Asia/Tokyo" {
				t.Errorf("loc = %s", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustBuild(t, tt.builtin, tt.with, dir))
		})
	}
}

func TestRootIsFixedAtBuild(t *testing.T) {
	// A relative dir must not follow later changes of the working directory.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	t.Chdir(dir)
	tool := mustBuild(t, "read_file", nil, "")
	t.Chdir(os.TempDir())
	if out, err := call(tool, map[string]any{"path": "a.txt"}); err != nil || !strings.Contains(out, "a") {
		t.Fatalf("got %q, %v", out, err)
	}
}
