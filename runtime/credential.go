package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Credential is the bearer token a user's request was authenticated with, held for
// the tools that forward it (an MCP server's forward_auth). Only authentication
// makes one. It prints and logs as "[credential]", no encoder sees its unexported
// token, and User leaves it out of JSON: it is in no trace, event, stored run or
// workflow history, so a run resumed after an approval, or run by a Temporal
// worker, has none.
type Credential struct{ token string }

// NewCredential holds a bearer token.
func NewCredential(token string) Credential { return Credential{token: token} }

// Token is the bearer token itself, for the request that forwards it; "" for none.
func (c Credential) Token() string { return c.token }

// IsZero reports there is no credential.
func (c Credential) IsZero() bool { return c.token == "" }

// Fingerprint names the credential in audit records without showing it: "sha256:"
// and the first 16 hex digits of its SHA-256, the start of the hash serve's static
// tokens are configured by. "" for none.
func (c Credential) Fingerprint() string {
	if c.token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(c.token))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// Format keeps the token out of every fmt verb, %+v and %#v of a User included.
func (c Credential) Format(f fmt.State, _ rune) {
	if c.token != "" {
		fmt.Fprint(f, "[credential]")
	}
}
