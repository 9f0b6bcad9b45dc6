package gemini

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// New reads the environment only through env: the SDK's own reading of
// GEMINI_API_KEY, GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL and
// GOOGLE_GENAI_USE_VERTEXAI from the process is bypassed.
func TestEnvOnlyThroughLookup(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "process-gemini-key")
	t.Setenv("GOOGLE_API_KEY", "process-google-key")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:1/")
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
	f := newFake(t, reply{file: "generate_text.json"})
	m, err := New(spec.Model{Provider: spec.ProviderGemini, Name: "gemini-2.5-flash"},
		envOf(map[string]string{"GOOGLE_API_KEY": testKey, "GOOGLE_GEMINI_BASE_URL": f.srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: hello}); err != nil {
		t.Fatalf("%v (the fake server answers only the key from env)", err)
	}
	if got := f.requests()[0].path; got != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Errorf("path %s: not the Gemini API", got)
	}
}

func TestSettings(t *testing.T) {
	cases := []struct {
		name string
		m    spec.Model
		env  map[string]string
		want string // error text, or "" for none
		base string
	}{
		{"GEMINI_API_KEY first", spec.Model{}, map[string]string{"GEMINI_API_KEY": "a", "GOOGLE_API_KEY": "b"}, "", DefaultBaseURL},
		{"no key", spec.Model{}, nil, "no API key: set GEMINI_API_KEY", ""},
		{"api_key_env has no fallback", spec.Model{APIKeyEnv: "TEAM_KEY"}, map[string]string{"GEMINI_API_KEY": "a"}, "TEAM_KEY (model.api_key_env) is not set", ""},
		{"spec base URL wins", spec.Model{BaseURL: "https://proxy.example/"}, map[string]string{"GEMINI_API_KEY": "a", "GOOGLE_GEMINI_BASE_URL": "https://env.example/"}, "", "https://proxy.example/"},
		{"bad base URL", spec.Model{BaseURL: "proxy.example"}, map[string]string{"GEMINI_API_KEY": "a"}, "is not an http(s) URL", ""},
		{"vertex without a project", spec.Model{}, map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_LOCATION": "us-central1"}, "needs GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION", ""},
		{"vertex without a location", spec.Model{}, map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "1", "GOOGLE_CLOUD_PROJECT": "p"}, "needs GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION", ""},
		{"no name", spec.Model{Name: "-"}, map[string]string{"GEMINI_API_KEY": "a"}, "no model name", ""},
		{"effort and budget", spec.Model{Reasoning: &spec.ModelReasoning{Effort: spec.EffortHigh, BudgetTokens: 100}}, map[string]string{"GEMINI_API_KEY": "a"}, "not both", ""},
		{"negative timeout", spec.Model{Timeout: spec.Duration{Duration: -1}}, map[string]string{"GEMINI_API_KEY": "a"}, "negative timeout", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.m.Provider = spec.ProviderGemini
			switch c.m.Name {
			case "":
				c.m.Name = "gemini-2.5-flash"
			case "-":
				c.m.Name = ""
			}
			m, err := New(c.m, envOf(c.env))
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err %v, want %q", err, c.want)
			case c.want == "" && m.BaseURL() != c.base:
				t.Errorf("base URL %s, want %s", m.BaseURL(), c.base)
			}
		})
	}
}

// On Vertex AI the request goes to the project's and location's path with the
// Application Default Credentials' token (here a service account whose token
// endpoint is the test server), never with an API key from the process.
func TestVertex(t *testing.T) {
	t.Setenv("GOOGLE_API_KEY", "process-google-key")
	var mu sync.Mutex
	var paths, auths, keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths, auths, keys = append(paths, r.URL.Path), append(auths, r.Header.Get("Authorization")), append(keys, r.Header.Get("x-goog-api-key"))
		mu.Unlock()
		if r.URL.Path == "/token" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"access_token":"ya29.test-token","expires_in":3599,"token_type":"Bearer"}`))
			return
		}
		body, _ := os.ReadFile("testdata/generate_text.json")
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", serviceAccount(t, srv.URL+"/token"))

	m, err := New(spec.Model{Provider: spec.ProviderGemini, Name: "gemini-2.5-flash"}, envOf(map[string]string{
		"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "my-proj", "GOOGLE_CLOUD_LOCATION": "europe-west4",
		"GOOGLE_VERTEX_BASE_URL": srv.URL + "/",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: hello}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := len(paths) - 1
	if paths[last] != "/v1beta1/projects/my-proj/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent" {
		t.Errorf("paths %v", paths)
	}
	if auths[last] != "Bearer ya29.test-token" || keys[last] != "" {
		t.Errorf("authorization %q, api key %q", auths[last], keys[last])
	}
	if vertexBaseURL("us-central1") != "https://us-central1-aiplatform.googleapis.com/" || vertexBaseURL("global") != "https://aiplatform.googleapis.com/" {
		t.Errorf("default Vertex AI hosts")
	}
}

// serviceAccount writes a service account key file whose token endpoint is
// tokenURL.
func serviceAccount(t *testing.T, tokenURL string) string {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "my-proj", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "agent@my-proj.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURL,
	})
	path := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(path, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
