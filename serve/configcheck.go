package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// checkConfig is what the schema cannot say about serve.yaml, reported at its
// lines: a token given twice, and a JWT section that cannot verify anything.
// Whether hs256_secret_env is set, and what the JWKS holds, is for the server to
// find at start: validate runs where the secrets are not.
func checkConfig(f *spec.ConfigFile, c *Config) {
	seen := map[[sha256.Size]byte]int{}
	for i, t := range c.Auth.Tokens {
		raw, err := hex.DecodeString(strings.TrimSpace(t.SHA256))
		if err != nil || len(raw) != sha256.Size {
			continue // the schema's pattern said so
		}
		h := [sha256.Size]byte(raw)
		if j, dup := seen[h]; dup {
			f.Errorf([]string{"auth", "tokens", strconv.Itoa(i), "sha256"}, "give each user a token of their own",
				"the same token as auth.tokens[%d] (user %s)", j, c.Auth.Tokens[j].User)
			continue
		}
		seen[h] = i
	}
	for i, o := range c.CORS.AllowedOrigins {
		if o != "*" && !validOrigin(o) {
			f.Errorf([]string{"cors", "allowed_origins", strconv.Itoa(i)}, `an origin is a scheme, a host and a port if not the default: "https://app.example.com", "http://localhost:5173"; or "*" for any`,
				"%q is not an origin", o)
		}
	}
	if j := c.Auth.JWT; j != nil {
		switch {
		case j.HS256SecretEnv == "" && j.JWKSFile == "" && j.JWKSURL == "":
			f.Errorf([]string{"auth", "jwt"}, "hs256_secret_env names the variable with an HS256 secret; jwks_file or jwks_url hold RS256/ES256 keys",
				"a jwt section needs a key: set hs256_secret_env, jwks_file or jwks_url")
		case j.JWKSFile != "" && j.JWKSURL != "":
			f.Errorf([]string{"auth", "jwt", "jwks_url"}, "keep one of them", "set jwks_file or jwks_url, not both")
		}
	}
}
