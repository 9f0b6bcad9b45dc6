package spec

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/agentrun/agentrun/schema"
)

// The schema walker compares the {allow: […]} form with the Go type; the short form's
// enum is compared here with RedirectPolicies.
func TestRedirectsSchemaEnum(t *testing.T) {
	var doc struct {
		Definitions map[string]struct {
			Properties map[string]struct {
				OneOf []struct {
					Enum []string `json:"enum"`
				} `json:"oneOf"`
			} `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(schema.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	branches := doc.Definitions["http_tool"].Properties["redirects"].OneOf
	if len(branches) != 2 {
		t.Fatalf("http_tool.redirects has %d oneOf branches, want the word and the {allow} form", len(branches))
	}
	if got, want := slices.Sorted(slices.Values(branches[0].Enum)), slices.Sorted(slices.Values(values(RedirectPolicies))); !slices.Equal(got, want) {
		t.Errorf("schema enum %v, RedirectPolicies %v", got, want)
	}
}

func TestRedirectsDecode(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		want  RedirectPolicy
		allow []string
	}{
		{name: "unset", yaml: "", want: RedirectSameHost},
		{name: "none", yaml: "      redirects: none\n", want: RedirectNone},
		{name: "same_host", yaml: "      redirects: same_host\n", want: RedirectSameHost},
		{name: "allow", yaml: "      redirects: {allow: [cdn.example.com, \"*.example.net:8443\"]}\n", want: RedirectAllow, allow: []string{"cdn.example.com", "*.example.net:8443"}},
	}
	l := newTestLoader(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nname: r\ntools:\n  - name: get\n    http:\n      url: https://shop.example/x\n" + tt.yaml
			s, diags := l.Load("r.yaml", []byte(src))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			r := s.Tools[0].HTTP.Redirects
			if got := r.Effective(); got != tt.want {
				t.Errorf("Effective() = %q, want %q", got, tt.want)
			}
			if tt.allow != nil && !slices.Equal(r.Allow, tt.allow) {
				t.Errorf("Allow = %v, want %v", r.Allow, tt.allow)
			}
		})
	}
	if got := (&Redirects{Allow: []string{"a.example"}}).Effective(); got != RedirectAllow {
		t.Errorf("a hand-built allow list is %q", got)
	}
}

func TestRedirectHostMatches(t *testing.T) {
	tests := []struct {
		entry string
		match []string
		miss  []string
	}{
		{"cdn.example.com", []string{"https://cdn.example.com/x", "http://CDN.example.com./x", "https://cdn.example.com:443/"},
			[]string{"https://cdn.example.com:8443/", "https://a.cdn.example.com/", "https://example.com/", "https://cdn.example.com.evil/"}},
		{"cdn.example.com:8443", []string{"https://cdn.example.com:8443/"}, []string{"https://cdn.example.com/", "http://cdn.example.com:8080/"}},
		{"*.example.com", []string{"https://a.example.com/", "https://a.b.example.com/"}, []string{"https://example.com/", "https://aexample.com/"}},
		{"127.0.0.1:8080", []string{"http://127.0.0.1:8080/"}, []string{"http://127.0.0.1/", "http://127.0.0.1:8081/"}},
		{"[::1]", []string{"http://[::1]/"}, []string{"http://[::1]:8080/"}},
	}
	for _, tt := range tests {
		h, err := ParseRedirectHost(tt.entry)
		if err != nil {
			t.Errorf("%s: %v", tt.entry, err)
			continue
		}
		for _, list := range []struct {
			urls []string
			want bool
		}{{tt.match, true}, {tt.miss, false}} {
			for _, raw := range list.urls {
				u, _ := url.Parse(raw)
				if got := h.Matches(u); got != list.want {
					t.Errorf("%s matches %s = %v", h, raw, got)
				}
			}
		}
	}
	for _, bad := range []string{"", "*", "https://a.example", "a.example/x", "user@a.example", "a.example:99999", "a.*.example", "*.10.0.0.1", "[::1", "[::1]:", "a b"} {
		if h, err := ParseRedirectHost(bad); err == nil {
			t.Errorf("%q parsed as %s", bad, fmt.Sprint(h))
		}
	}
}
