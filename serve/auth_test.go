package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/agentrun/agentrun/runtime/tool"
)

const (
	testIssuer   = "https://id.example.com"
	testAudience = "agentrun"
	testSecret   = "0123456789abcdef0123456789abcdef-test-secret"
	testOctKey   = "a symmetric key published in the JWKS file"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func requestWith(authorization ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/runs", nil)
	for _, a := range authorization {
		r.Header.Add("Authorization", a)
	}
	return r
}

func mustAuthenticator(t *testing.T, cfg AuthConfig, vars map[string]string) Authenticator {
	t.Helper()
	a, err := NewAuthenticator(cfg, env(vars))
	if err != nil {
		t.Fatalf("NewAuthenticator: %v", err)
	}
	t.Cleanup(func() {
		if err := a.(io.Closer).Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

func TestAuthConfigErrors(t *testing.T) {
	dir := t.TempDir()
	emptyJWKS := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(emptyJWKS, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(notJSON, []byte(`keys`), 0o600); err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	good := func(mod func(*JWTConfig)) *JWTConfig {
		c := &JWTConfig{HS256SecretEnv: "JWT_SECRET", Issuer: testIssuer, Audience: testAudience}
		mod(c)
		return c
	}
	tests := []struct {
		name string
		cfg  AuthConfig
		env  map[string]string
		want []string // each must appear in the error
	}{
		{name: "nothing configured", cfg: AuthConfig{}, want: []string{"auth: configure tokens or jwt"}},
		{
			name: "bad hashes and missing user",
			cfg: AuthConfig{Tokens: []TokenConfig{
				{SHA256: sha256Hex("a"), User: "alice"},
				{SHA256: "abc", User: "bob"},
				{SHA256: strings.Repeat("zz", 32), User: "carol"},
				{SHA256: sha256Hex("d")},
				{SHA256: strings.ToUpper(sha256Hex("a")), User: "eve"},
			}},
			want: []string{
				"auth.tokens[1].sha256: want 64 hex digits",
				"auth.tokens[2].sha256: want 64 hex digits",
				"auth.tokens[3].user: is required",
				"auth.tokens[4].sha256: the same token as auth.tokens[0]",
			},
		},
		{
			name: "issuer and audience required",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.Issuer, c.Audience = "", "" })},
			env:  map[string]string{"JWT_SECRET": testSecret},
			want: []string{"auth.jwt: issuer is required", "auth.jwt: audience is required"},
		},
		{
			name: "no key source",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.HS256SecretEnv = "" })},
			want: []string{"auth.jwt: set at least one of hs256_secret_env, jwks_file, jwks_url"},
		},
		{
			name: "secret not set",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.HS256SecretEnv = "LLM_X" })},
			want: []string{"auth.jwt.hs256_secret_env: LLM_X is not set"},
		},
		{
			name: "secret too short",
			cfg:  AuthConfig{JWT: good(func(*JWTConfig) {})},
			env:  map[string]string{"JWT_SECRET": "short"},
			want: []string{"auth.jwt.hs256_secret_env: JWT_SECRET is shorter than 32 bytes"},
		},
		{
			name: "negative leeway",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.Leeway = -time.Second })},
			env:  map[string]string{"JWT_SECRET": testSecret},
			want: []string{"auth.jwt.leeway: must not be negative"},
		},
		{
			name: "file and url",
			cfg: AuthConfig{JWT: good(func(c *JWTConfig) {
				c.JWKSFile, c.JWKSURL = emptyJWKS, "https://id.example.com/jwks"
			})},
			env:  map[string]string{"JWT_SECRET": testSecret},
			want: []string{"auth.jwt: set jwks_file or jwks_url, not both"},
		},
		{
			name: "jwks file missing",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.HS256SecretEnv, c.JWKSFile = "", filepath.Join(dir, "nope.json") })},
			want: []string{"auth.jwt.jwks_file: open "},
		},
		{
			name: "jwks file not json",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.HS256SecretEnv, c.JWKSFile = "", notJSON })},
			want: []string{"auth.jwt.jwks_file: " + notJSON + ": not a JWKS"},
		},
		{
			name: "jwks file without keys",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.HS256SecretEnv, c.JWKSFile = "", emptyJWKS })},
			want: []string{"has no RSA or P-256 key"},
		},
		{
			name: "jwks url over plain http",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.HS256SecretEnv, c.JWKSURL = "", "http://id.example.com/jwks" })},
			want: []string{"auth.jwt.jwks_url: ", "want https"},
		},
		{
			name: "jwks url unreachable",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.HS256SecretEnv, c.JWKSURL = "", down.URL })},
			want: []string{"auth.jwt.jwks_url: "},
		},
		{
			name: "empty attribute claim",
			cfg:  AuthConfig{JWT: good(func(c *JWTConfig) { c.Attributes = map[string]string{"tier": ""} })},
			env:  map[string]string{"JWT_SECRET": testSecret},
			want: []string{"auth.jwt.attributes: \"tier\""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAuthenticator(tt.cfg, env(tt.env))
			if err == nil {
				a.(io.Closer).Close()
				t.Fatal("NewAuthenticator succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

func TestAuthStaticTokens(t *testing.T) {
	a := mustAuthenticator(t, AuthConfig{Tokens: []TokenConfig{
		{SHA256: sha256Hex("alice-token"), User: "alice", Attributes: map[string]string{"tier": "gold"}},
		{SHA256: strings.ToUpper(sha256Hex("bob-token")), User: "bob"},
	}}, nil)

	tests := []struct {
		name          string
		authorization []string
		want          Principal
		wantErr       string // "" = success; ErrNoCredentials.Error() = errors.Is
	}{
		{name: "no header", wantErr: ErrNoCredentials.Error()},
		{name: "empty header", authorization: []string{""}, wantErr: ErrNoCredentials.Error()},
		{name: "basic scheme", authorization: []string{"Basic YWxpY2U6YWxpY2UtdG9rZW4="}, wantErr: `Authorization header is not "Bearer <token>"`},
		{name: "token without scheme", authorization: []string{"alice-token"}, wantErr: `Authorization header is not "Bearer <token>"`},
		{name: "empty bearer", authorization: []string{"Bearer "}, wantErr: "empty bearer token"},
		{name: "two headers", authorization: []string{"Bearer alice-token", "Bearer bob-token"}, wantErr: "more than one Authorization header"},
		{name: "wrong token", authorization: []string{"Bearer alice-token2"}, wantErr: "bearer token not recognised"},
		{name: "jwt-shaped token, no jwt configured", authorization: []string{"Bearer a.b.c"}, wantErr: "bearer token not recognised"},
		{
			name:          "right token",
			authorization: []string{"Bearer alice-token"},
			want:          Principal{User: tool.User{ID: "alice", Attributes: map[string]string{"tier": "gold"}}, Via: "token alice"},
		},
		{
			name:          "scheme is case-insensitive, upper-case hash configured",
			authorization: []string{"bearer bob-token"},
			want:          Principal{User: tool.User{ID: "bob"}, Via: "token bob"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(requestWith(tt.authorization...))
			checkAuth(t, got, err, tt.want, tt.wantErr, "alice-token", "bob-token")
		})
	}

	t.Run("principal attributes are a copy", func(t *testing.T) {
		p, err := a.Authenticate(requestWith("Bearer alice-token"))
		if err != nil {
			t.Fatal(err)
		}
		p.User.Attributes["tier"] = "platinum"
		p, _ = a.Authenticate(requestWith("Bearer alice-token"))
		if p.User.Attributes["tier"] != "gold" {
			t.Errorf("tier = %q after a caller changed an earlier principal", p.User.Attributes["tier"])
		}
	})
}

// checkAuth compares an Authenticate result; no error may contain a credential.
// A principal's user keeps the request's token (one of secrets) as its credential.
func checkAuth(t *testing.T, got Principal, err error, want Principal, wantErr string, secrets ...string) {
	t.Helper()
	if wantErr == "" {
		if err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
		if token := got.User.Credential.Token(); token == "" || !slices.Contains(secrets, token) {
			t.Errorf("the user's credential is %q, want the request's token", token)
		}
		got.User.Credential = tool.Credential{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("principal = %+v, want %+v", got, want)
		}
		return
	}
	if err == nil {
		t.Fatalf("Authenticate = %+v, want error %q", got, wantErr)
	}
	if wantErr == ErrNoCredentials.Error() {
		if !errors.Is(err, ErrNoCredentials) {
			t.Errorf("error = %v, want ErrNoCredentials", err)
		}
	} else if errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("error = %q, want one containing %q", err, wantErr)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q contains a credential", err)
		}
	}
}

// testKeys are the signing keys of the JWT tests, and JWKS files and a JWKS server
// that publish their public halves.
type testKeys struct {
	rsa, rsa2 *rsa.PrivateKey
	ec        *ecdsa.PrivateKey
	ecP384    *ecdsa.PrivateKey
	file      string // JWKS: rsa (kid "rsa-1"), ec ("ec-1"), ec384 ("ec-384"), an oct key ("oct-1")

	mu     sync.Mutex
	served []byte // what server serves; rotate replaces it
	server *httptest.Server
}

func newTestKeys(t *testing.T) *testKeys {
	t.Helper()
	k := &testKeys{}
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if k.ecP384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	set := jwks(t, map[string]any{
		"rsa-1":  &k.rsa.PublicKey,
		"ec-1":   &k.ec.PublicKey,
		"ec-384": &k.ecP384.PublicKey,
		"oct-1":  []byte(testOctKey),
	})
	k.file = filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(k.file, set, 0o600); err != nil {
		t.Fatal(err)
	}
	k.served = jwks(t, map[string]any{"rsa-1": &k.rsa.PublicKey, "ec-1": &k.ec.PublicKey})
	k.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		k.mu.Lock()
		defer k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(k.served)
	}))
	t.Cleanup(k.server.Close)
	return k
}

// rotate makes the JWKS server publish rsa2 (kid "rsa-2") as well.
func (k *testKeys) rotate(t *testing.T) {
	set := jwks(t, map[string]any{"rsa-1": &k.rsa.PublicKey, "rsa-2": &k.rsa2.PublicKey, "ec-1": &k.ec.PublicKey})
	k.mu.Lock()
	k.served = set
	k.mu.Unlock()
}

func jwks(t *testing.T, keys map[string]any) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, kid := range slices.Sorted(maps.Keys(keys)) {
		_, oct := keys[kid].([]byte)
		// Private: true is needed to publish a symmetric key at all, which is what
		// the tests want to see refused.
		opts := jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid}, Marshal: jwkset.JWKMarshalOptions{Private: oct}}
		j, err := jwkset.NewJWKFromKey(keys[kid], opts)
		if err != nil {
			t.Fatalf("JWK %s: %v", kid, err)
		}
		m := j.Marshal()
		set.Keys = append(set.Keys, m)
	}
	out, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// claims are valid for the test configuration unless a test changes them.
func claims(mod func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"iss": testIssuer,
		"aud": testAudience,
		"sub": "u-42",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	if mod != nil {
		mod(c)
	}
	return c
}

func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", method.Alg(), err)
	}
	return s
}

func TestAuthJWT(t *testing.T) {
	keys := newTestKeys(t)
	vars := map[string]string{"JWT_SECRET": testSecret}
	base := func(mod func(*JWTConfig)) AuthConfig {
		c := &JWTConfig{Issuer: testIssuer, Audience: testAudience}
		mod(c)
		return AuthConfig{JWT: c}
	}
	hs := mustAuthenticator(t, base(func(c *JWTConfig) { c.HS256SecretEnv = "JWT_SECRET" }), vars)
	file := mustAuthenticator(t, base(func(c *JWTConfig) { c.JWKSFile = keys.file }), vars)
	url := mustAuthenticator(t, base(func(c *JWTConfig) { c.JWKSURL = keys.server.URL }), vars)
	// both accepts HS256 and the JWKS file: an HS256 token must still use the secret.
	both := mustAuthenticator(t, base(func(c *JWTConfig) { c.HS256SecretEnv, c.JWKSFile = "JWT_SECRET", keys.file }), vars)
	// mixed also has a static token; JWTs still verify.
	mixed := mustAuthenticator(t, AuthConfig{
		Tokens: []TokenConfig{{SHA256: sha256Hex("static"), User: "ops"}},
		JWT:    &JWTConfig{HS256SecretEnv: "JWT_SECRET", Issuer: testIssuer, Audience: testAudience},
	}, vars)

	rsaPublicPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&keys.rsa.PublicKey))})
	rsaPublicDER := x509.MarshalPKCS1PublicKey(&keys.rsa.PublicKey)
	hsValid := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(nil))
	u42 := Principal{User: tool.User{ID: "u-42"}, Via: "jwt"}

	tests := []struct {
		name    string
		auth    Authenticator
		token   string
		want    Principal
		wantErr string
	}{
		{name: "HS256 valid", auth: hs, token: hsValid, want: u42},
		{name: "HS256 with a static token configured", auth: mixed, token: hsValid, want: u42},
		{name: "HS256 when JWKS is configured too", auth: both, token: hsValid, want: u42},
		{
			name:    "expired",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })),
			wantErr: "token is expired",
		},
		{
			name:  "expired within the leeway",
			auth:  hs,
			token: sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() })),
			want:  u42,
		},
		{
			name:    "no exp",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { delete(c, "exp") })),
			wantErr: "token is missing required claim",
		},
		{
			name:    "not yet valid",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Minute).Unix() })),
			wantErr: "token is not valid yet",
		},
		{
			name:    "issued in the future",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Minute).Unix() })),
			wantErr: "token used before issued",
		},
		{
			name:    "wrong issuer",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })),
			wantErr: "token has invalid issuer",
		},
		{
			name:    "no issuer",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { delete(c, "iss") })),
			wantErr: "iss claim is required",
		},
		{
			name:    "wrong audience",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["aud"] = []string{"other"} })),
			wantErr: "token has invalid audience",
		},
		{
			name:  "audience among several",
			auth:  hs,
			token: sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["aud"] = []string{"other", testAudience} })),
			want:  u42,
		},
		{
			name:    "bad signature",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret+"-other"), "", claims(nil)),
			wantErr: "token signature is invalid",
		},
		{
			name:    "tampered payload",
			auth:    hs,
			token:   tamper(hsValid, claims(func(c jwt.MapClaims) { c["sub"] = "admin" })),
			wantErr: "token signature is invalid",
		},
		{
			name:    "alg none",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(nil)),
			wantErr: "signing method none is invalid",
		},
		{
			name:    "alg none against JWKS",
			auth:    file,
			token:   sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-1", claims(nil)),
			wantErr: "signing method none is invalid",
		},
		{
			name:    "HS256 signed with the RSA public key (PEM) against RS256 JWKS",
			auth:    file,
			token:   sign(t, jwt.SigningMethodHS256, rsaPublicPEM, "rsa-1", claims(nil)),
			wantErr: "signing method HS256 is invalid",
		},
		{
			name:    "HS256 signed with the RSA public key (DER) against RS256 JWKS",
			auth:    url,
			token:   sign(t, jwt.SigningMethodHS256, rsaPublicDER, "rsa-1", claims(nil)),
			wantErr: "signing method HS256 is invalid",
		},
		{
			name:    "HS256 signed with the RSA public key when HS256 is configured too",
			auth:    both,
			token:   sign(t, jwt.SigningMethodHS256, rsaPublicPEM, "rsa-1", claims(nil)),
			wantErr: "token signature is invalid",
		},
		{
			name:    "HS256 signed with an oct key of the JWKS",
			auth:    file,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testOctKey), "oct-1", claims(nil)),
			wantErr: "signing method HS256 is invalid",
		},
		{
			name:    "HS256 signed with an oct key of the JWKS when HS256 is configured too",
			auth:    both,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testOctKey), "oct-1", claims(nil)),
			wantErr: "token signature is invalid",
		},
		{
			name:    "RS256 naming the oct kid",
			auth:    file,
			token:   sign(t, jwt.SigningMethodRS256, keys.rsa, "oct-1", claims(nil)),
			wantErr: "not a RS256 key",
		},
		{
			name:    "RS256 to an HS256-only authenticator",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodRS256, keys.rsa, "rsa-1", claims(nil)),
			wantErr: "signing method RS256 is invalid",
		},
		{name: "RS256 via JWKS file", auth: file, token: sign(t, jwt.SigningMethodRS256, keys.rsa, "rsa-1", claims(nil)), want: u42},
		{name: "RS256 via JWKS file, no kid", auth: file, token: sign(t, jwt.SigningMethodRS256, keys.rsa, "", claims(nil)), want: u42},
		{name: "ES256 via JWKS file", auth: file, token: sign(t, jwt.SigningMethodES256, keys.ec, "ec-1", claims(nil)), want: u42},
		{name: "ES256 via JWKS file, no kid", auth: file, token: sign(t, jwt.SigningMethodES256, keys.ec, "", claims(nil)), want: u42},
		{name: "RS256 via JWKS URL", auth: url, token: sign(t, jwt.SigningMethodRS256, keys.rsa, "rsa-1", claims(nil)), want: u42},
		{name: "ES256 via JWKS URL", auth: url, token: sign(t, jwt.SigningMethodES256, keys.ec, "ec-1", claims(nil)), want: u42},
		{
			name:    "RS256 signed by a key not in the JWKS",
			auth:    file,
			token:   sign(t, jwt.SigningMethodRS256, keys.rsa2, "rsa-1", claims(nil)),
			wantErr: "token signature is invalid",
		},
		{
			name:    "RS256 with an unknown kid",
			auth:    file,
			token:   sign(t, jwt.SigningMethodRS256, keys.rsa2, "rsa-9", claims(nil)),
			wantErr: "not found",
		},
		{
			name:    "ES256 naming an RSA kid",
			auth:    file,
			token:   sign(t, jwt.SigningMethodES256, keys.ec, "rsa-1", claims(nil)),
			wantErr: "not a ES256 key",
		},
		{
			name:    "ES384 key is not accepted",
			auth:    file,
			token:   sign(t, jwt.SigningMethodES384, keys.ecP384, "ec-384", claims(nil)),
			wantErr: "signing method ES384 is invalid",
		},
		{
			name:    "user claim missing",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { delete(c, "sub") })),
			wantErr: `claim "sub" (the user id) is missing or not a non-empty string`,
		},
		{
			name:    "user claim empty",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["sub"] = "" })),
			wantErr: `claim "sub" (the user id) is missing`,
		},
		{
			name:    "user claim not a string",
			auth:    hs,
			token:   sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["sub"] = 42 })),
			wantErr: `claim "sub" (the user id) is missing or not a non-empty string`,
		},
		{name: "malformed", auth: hs, token: "bm90.YQ.c2lnbmF0dXJl", wantErr: "token is malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.auth.Authenticate(requestWith("Bearer " + tt.token))
			parts := strings.Split(tt.token, ".")
			checkAuth(t, got, err, tt.want, tt.wantErr, tt.token, parts[len(parts)-1])
		})
	}

	t.Run("JWKS URL picks up a rotated key", func(t *testing.T) {
		token := sign(t, jwt.SigningMethodRS256, keys.rsa2, "rsa-2", claims(nil))
		keys.rotate(t)
		got, err := url.Authenticate(requestWith("Bearer " + token))
		checkAuth(t, got, err, u42, "", token)
	})
}

// tamper replaces a token's payload, keeping its header and signature.
func tamper(token string, c jwt.MapClaims) string {
	parts := strings.Split(token, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString(must(json.Marshal(c)))
	return strings.Join(parts, ".")
}

func TestAuthJWTClaims(t *testing.T) {
	a := mustAuthenticator(t, AuthConfig{JWT: &JWTConfig{
		HS256SecretEnv: "JWT_SECRET",
		Issuer:         testIssuer,
		Audience:       testAudience,
		UserClaim:      "email",
		Attributes: map[string]string{
			"tier":    "plan",
			"org":     "org_id",
			"credits": "credits",
			"ratio":   "ratio",
			"admin":   "is_admin",
			"teams":   "teams",
			"absent":  "nope",
			"subject": "sub",
		},
		Leeway: time.Second,
	}}, map[string]string{"JWT_SECRET": testSecret})

	tests := []struct {
		name    string
		claims  jwt.MapClaims
		want    Principal
		wantErr string
	}{
		{
			name: "attributes from claims",
			claims: claims(func(c jwt.MapClaims) {
				c["email"] = "ann@example.com"
				c["plan"] = "gold"
				c["org_id"] = 12345678901
				c["credits"] = 0
				c["ratio"] = 0.25
				c["is_admin"] = false
				c["teams"] = []string{"a", "b"}
			}),
			want: Principal{User: tool.User{ID: "ann@example.com", Attributes: map[string]string{
				"tier": "gold", "org": "12345678901", "credits": "0", "ratio": "0.25", "admin": "false", "subject": "u-42",
			}}, Via: "jwt"},
		},
		{
			name:   "no attribute claims",
			claims: claims(func(c jwt.MapClaims) { c["email"] = "ann@example.com"; delete(c, "sub") }),
			want:   Principal{User: tool.User{ID: "ann@example.com"}, Via: "jwt"},
		},
		{
			name:    "configured user claim missing",
			claims:  claims(nil),
			wantErr: `claim "email" (the user id) is missing or not a non-empty string`,
		},
		{
			name:    "configured user claim a number",
			claims:  claims(func(c jwt.MapClaims) { c["email"] = 7 }),
			wantErr: `claim "email" (the user id) is missing or not a non-empty string`,
		},
		{
			name: "configured leeway",
			claims: claims(func(c jwt.MapClaims) {
				c["email"] = "ann@example.com"
				c["exp"] = time.Now().Add(-10 * time.Second).Unix()
			}),
			wantErr: "token is expired",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", tt.claims)
			got, err := a.Authenticate(requestWith("Bearer " + token))
			checkAuth(t, got, err, tt.want, tt.wantErr, token)
		})
	}
}

// A JWT whose user id is a static token's user is refused: an identity provider
// where users choose their name or e-mail must not let one become "ops" and
// inherit that user's conversations and facts.
func TestAuthJWTUserCollidesWithStaticUser(t *testing.T) {
	a := mustAuthenticator(t, AuthConfig{
		Tokens: []TokenConfig{{SHA256: sha256Hex("static"), User: "ops"}},
		JWT:    &JWTConfig{HS256SecretEnv: "JWT_SECRET", Issuer: testIssuer, Audience: testAudience},
	}, map[string]string{"JWT_SECRET": testSecret})
	ops := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(func(c jwt.MapClaims) { c["sub"] = "ops" }))
	if p, err := a.Authenticate(requestWith("Bearer " + ops)); err == nil {
		t.Fatalf("a JWT for the static user ops was accepted as %+v", p)
	}
	other := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(nil))
	if p, err := a.Authenticate(requestWith("Bearer " + other)); err != nil || p.User.ID != "u-42" {
		t.Fatalf("another JWT: %+v, %v", p, err)
	}
	if p, err := a.Authenticate(requestWith("Bearer static")); err != nil || p.User.ID != "ops" {
		t.Fatalf("the static token: %+v, %v", p, err)
	}
}
