package runtime_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/tool"
)

// A user's credential shows nowhere it could be printed, logged or encoded.
func TestCredentialNeverShown(t *testing.T) {
	const token = "alice-token-0123456789"
	u := tool.User{ID: "alice", Credential: tool.NewCredential(token)}
	if u.Credential.Token() != token {
		t.Fatal("the token is kept for the request that forwards it")
	}
	var shown []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		shown = append(shown, fmt.Sprintf(verb, u), fmt.Sprintf(verb, u.Credential))
	}
	for _, v := range []any{u, u.Credential, map[string]tool.Credential{"c": u.Credential}} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, string(data))
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("run", "user", u, "credential", u.Credential)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("run", "user", u, "credential", u.Credential)
	shown = append(shown, logs.String())
	for _, s := range shown {
		if strings.Contains(s, token) || strings.Contains(s, fmt.Sprintf("%x", token)) {
			t.Errorf("the token shows in %s", s)
		}
	}
	if fp := u.Credential.Fingerprint(); !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+16 || (tool.Credential{}).Fingerprint() != "" {
		t.Errorf("fingerprint %q", fp)
	}
}
