package serve

import (
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// Roles come from a static token's roles or a JWT's roles claim (an array or a
// space-separated string); unknown roles are a config error for static tokens and
// ignored in a JWT.
func TestAuthRoles(t *testing.T) {
	_, err := NewAuthenticator(AuthConfig{Tokens: []TokenConfig{{SHA256: sha256Hex("tok-1"), User: "u", Roles: []string{"admin"}}}}, env(nil))
	if err == nil || !strings.Contains(err.Error(), `auth.tokens[0].roles: unknown role "admin"`) {
		t.Errorf("an unknown static role: %v", err)
	}
	a := mustAuthenticator(t, AuthConfig{
		Tokens: []TokenConfig{{SHA256: sha256Hex("tok-1"), User: "olga", Roles: []string{RoleApprover}}, {SHA256: sha256Hex("tok-2"), User: "ann"}},
		JWT:    &JWTConfig{HS256SecretEnv: "S", Issuer: testIssuer, Audience: testAudience, RolesClaim: "groups"},
	}, map[string]string{"S": testSecret})
	check := func(name, token string, want bool) {
		t.Helper()
		p, err := a.Authenticate(requestWith("Bearer " + token))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Approver() != want {
			t.Errorf("%s: approver %v (roles %q), want %v", name, p.Approver(), p.Roles, want)
		}
	}
	check("static approver", "tok-1", true)
	check("static user", "tok-2", false)
	jwtWith := func(groups any) string {
		return sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) {
			if groups != nil {
				c["groups"] = groups
			}
			c["roles"] = []string{RoleApprover} // not the configured claim
		}))
	}
	check("jwt array", jwtWith([]string{"staff", RoleApprover}), true)
	check("jwt string", jwtWith("staff approver"), true)
	check("jwt other roles", jwtWith([]string{"staff"}), false)
	check("jwt no claim", jwtWith(nil), false)
	check("jwt number", jwtWith(42), false)
	if got := claimRoles([]any{"approver", "approver", "x"}); !slices.Equal(got, []string{RoleApprover}) {
		t.Errorf("claimRoles = %q", got)
	}
}
