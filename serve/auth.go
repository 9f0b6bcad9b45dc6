package serve

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/agentrun/agentrun/runtime/tool"
)

// An Authenticator finds the principal of a request from its credentials. An error
// is a 401: ErrNoCredentials when the request has none, any other when they are not
// valid (its text is for logs, never for the client).
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

// ErrNoCredentials is a request without credentials.
var ErrNoCredentials = errors.New("no credentials")

// Defaults and limits of JWT verification.
const (
	defaultLeeway    = 30 * time.Second
	defaultUserClaim = "sub"
	// defaultRolesClaim is the claim holding a JWT principal's roles.
	defaultRolesClaim = "roles"
	// minHS256Secret is RFC 7518's floor: an HMAC key at least as long as the hash.
	minHS256Secret = 32
	// jwksRefreshInterval is how often a JWKS URL is fetched again; a token with an
	// unknown key id also triggers a fetch (keyfunc's default: at most every 5 minutes).
	jwksRefreshInterval = time.Hour
	// jwksFetchTimeout bounds one fetch of a JWKS URL, and how long a request with an
	// unknown key id may wait for one.
	jwksFetchTimeout = 10 * time.Second
)

// The algorithms each key source verifies; nothing else is ever accepted.
const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
)

// NewAuthenticator checks cfg and builds the Authenticator it describes: static
// bearer tokens, JWTs, or both. lookupEnv (os.LookupEnv in production) resolves
// hs256_secret_env. A JWKS file is read now; a JWKS URL is fetched now (an error if
// that fails) and then refreshed in the background until Close.
//
// The Authenticator returned is also an io.Closer; Close stops the JWKS refresh and
// must be called once the server is done with it (it is a no-op without a URL).
func NewAuthenticator(cfg AuthConfig, lookupEnv func(string) (string, bool)) (Authenticator, error) {
	var errs []error
	a := &authenticator{close: func() {}}
	a.tokens, errs = newStaticTokens(cfg.Tokens)
	a.staticUsers = map[string]bool{}
	for _, t := range a.tokens {
		a.staticUsers[t.user] = true
	}
	if cfg.JWT != nil {
		v, jwtErrs := newJWTVerifier(*cfg.JWT, lookupEnv)
		errs = append(errs, jwtErrs...)
		if v != nil {
			a.jwt = v
			a.close = v.close
		}
	}
	if len(cfg.Tokens) == 0 && cfg.JWT == nil {
		errs = append(errs, errors.New("auth: configure tokens or jwt (or both)"))
	}
	if len(errs) > 0 {
		a.close()
		return nil, errors.Join(errs...)
	}
	return a, nil
}

// authenticator accepts a bearer token that is one of the static tokens or, failing
// that, a JWT the verifier accepts.
type authenticator struct {
	tokens      map[[32]byte]staticToken // by the token's SHA-256
	staticUsers map[string]bool          // the users of the static tokens
	jwt         *jwtVerifier             // nil without auth.jwt
	close       func()
}

var (
	_ Authenticator = (*authenticator)(nil)
	_ io.Closer     = (*authenticator)(nil)
)

// Close stops the background refresh of a JWKS URL.
func (a *authenticator) Close() error {
	a.close()
	return nil
}

// Authenticate finds the principal of a bearer token, which its user keeps as the
// credential MCP servers with forward_auth are called with.
func (a *authenticator) Authenticate(r *http.Request) (Principal, error) {
	token, err := bearerToken(r)
	if err != nil {
		return Principal{}, err
	}
	p, err := a.principal(r.Context(), token)
	if err != nil {
		return Principal{}, err
	}
	p.User.Credential = tool.NewCredential(token)
	return p, nil
}

func (a *authenticator) principal(ctx context.Context, token string) (Principal, error) {
	if p, ok := a.matchStatic(token); ok {
		return p, nil
	}
	if a.jwt != nil && looksLikeJWT(token) {
		p, err := a.jwt.verify(ctx, token)
		if err == nil && a.staticUsers[p.User.ID] {
			// A self-chosen name or e-mail in the identity provider must not
			// become a static token's user and inherit its conversations and facts.
			return Principal{}, fmt.Errorf("the token's user %q is a static token's user: refused", p.User.ID)
		}
		return p, err
	}
	return Principal{}, errors.New("bearer token not recognised")
}

// bearerToken reads the Authorization header, the only place credentials are taken
// from: a token in a URL ends up in logs and a cookie invites CSRF.
func bearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", ErrNoCredentials
	case 1:
	default:
		return "", errors.New("more than one Authorization header")
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if scheme == "" {
		return "", ErrNoCredentials
	}
	if !strings.EqualFold(scheme, "Bearer") {
		// Not even the scheme is quoted: in "Authorization: <token>" it is the token.
		return "", errors.New(`Authorization header is not "Bearer <token>"`)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", errors.New("empty bearer token")
	}
	return token, nil
}

// looksLikeJWT is a JWS compact serialisation: three dot-separated parts.
func looksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2
}

// staticToken is a configured token: only its hash is kept.
type staticToken struct {
	hash       [sha256.Size]byte
	user       string
	attributes map[string]string
	roles      []string
}

func newStaticTokens(cfgs []TokenConfig) (map[[sha256.Size]byte]staticToken, []error) {
	var errs []error
	tokens := make(map[[sha256.Size]byte]staticToken, len(cfgs))
	seen := map[[sha256.Size]byte]int{}
	for i, c := range cfgs {
		key := fmt.Sprintf("auth.tokens[%d]", i)
		var t staticToken
		raw, err := hex.DecodeString(strings.TrimSpace(c.SHA256))
		if err != nil || len(raw) != sha256.Size {
			errs = append(errs, fmt.Errorf("%s.sha256: want 64 hex digits (the SHA-256 of the token, e.g. from `printf %%s TOKEN | sha256sum`)", key))
		} else {
			copy(t.hash[:], raw)
			if j, dup := seen[t.hash]; dup {
				errs = append(errs, fmt.Errorf("%s.sha256: the same token as auth.tokens[%d]", key, j))
			}
			seen[t.hash] = i
		}
		if strings.TrimSpace(c.User) == "" {
			errs = append(errs, fmt.Errorf("%s.user: is required (the user the token stands for)", key))
		}
		for name := range c.Attributes {
			if name == "" {
				errs = append(errs, fmt.Errorf("%s.attributes: an attribute name is empty", key))
			}
		}
		for _, r := range c.Roles {
			if !containsString(knownRoles, r) {
				errs = append(errs, fmt.Errorf("%s.roles: unknown role %q; the roles are %s", key, r, strings.Join(knownRoles, ", ")))
			}
		}
		t.user = c.User
		t.attributes = maps.Clone(c.Attributes)
		t.roles = slices.Clone(c.Roles)
		tokens[t.hash] = t
	}
	return tokens, errs
}

// matchStatic looks the token up by its SHA-256. Only hashes are compared, so the
// time a lookup takes depends on the hash of what was sent, which tells an
// attacker nothing about a configured token; and it is one lookup however many
// tokens there are.
func (a *authenticator) matchStatic(token string) (Principal, bool) {
	if len(a.tokens) == 0 {
		return Principal{}, false
	}
	t, ok := a.tokens[sha256.Sum256([]byte(token))]
	if !ok {
		return Principal{}, false
	}
	return Principal{
		User:  tool.User{ID: t.user, Attributes: maps.Clone(t.attributes)},
		Via:   "token " + t.user,
		Roles: slices.Clone(t.roles),
	}, true
}

// jwtVerifier checks JWTs: the signature with a key for the token's algorithm (each
// source of keys serves only its own algorithms), then issuer, audience and times.
type jwtVerifier struct {
	secret     []byte          // HS256; nil when not configured
	jwks       keyfunc.Keyfunc // RS256 and ES256; nil when not configured
	parser     *jwt.Parser
	userClaim  string
	rolesClaim string
	attributes map[string]string // attribute name → claim
	close      func()
}

func newJWTVerifier(cfg JWTConfig, lookupEnv func(string) (string, bool)) (*jwtVerifier, []error) {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("auth.jwt"+format, args...))
	}
	v := &jwtVerifier{
		userClaim:  orDefault(cfg.UserClaim, defaultUserClaim),
		rolesClaim: orDefault(cfg.RolesClaim, defaultRolesClaim),
		attributes: maps.Clone(cfg.Attributes),
		close:      func() {},
	}
	if strings.TrimSpace(cfg.Issuer) == "" {
		fail(": issuer is required")
	}
	if strings.TrimSpace(cfg.Audience) == "" {
		fail(": audience is required")
	}
	if cfg.HS256SecretEnv == "" && cfg.JWKSFile == "" && cfg.JWKSURL == "" {
		fail(": set at least one of hs256_secret_env, jwks_file, jwks_url")
	}
	if cfg.JWKSFile != "" && cfg.JWKSURL != "" {
		fail(": set jwks_file or jwks_url, not both")
	}
	if cfg.Leeway < 0 {
		fail(".leeway: must not be negative")
	}
	for name, claim := range cfg.Attributes {
		if name == "" || claim == "" {
			fail(".attributes: %q: %q: attribute and claim names must not be empty", name, claim)
		}
	}

	var methods []string
	if cfg.HS256SecretEnv != "" {
		secret, ok := lookupEnv(cfg.HS256SecretEnv)
		switch {
		case !ok || secret == "":
			fail(".hs256_secret_env: %s is not set", cfg.HS256SecretEnv)
		case len(secret) < minHS256Secret:
			fail(".hs256_secret_env: %s is shorter than %d bytes", cfg.HS256SecretEnv, minHS256Secret)
		default:
			v.secret = []byte(secret)
			methods = append(methods, algHS256)
		}
	}
	if cfg.JWKSFile != "" && cfg.JWKSURL == "" {
		kf, err := jwksFromFile(cfg.JWKSFile)
		if err != nil {
			fail(".jwks_file: %v", err)
		} else {
			v.jwks = kf
			methods = append(methods, algRS256, algES256)
		}
	}
	if cfg.JWKSURL != "" && cfg.JWKSFile == "" {
		kf, stop, err := jwksFromURL(cfg.JWKSURL)
		if err != nil {
			fail(".jwks_url: %v", err)
		} else {
			v.jwks, v.close = kf, stop
			methods = append(methods, algRS256, algES256)
		}
	}
	if len(errs) > 0 {
		v.close()
		return nil, errs
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(methods),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(orDefault(cfg.Leeway, defaultLeeway)),
		// Numbers stay as written, so an attribute reads "42", not "42.0" or "4.2e+01".
		jwt.WithJSONNumber(),
	)
	return v, nil
}

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (v *jwtVerifier) verify(ctx context.Context, token string) (Principal, error) {
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, v.keyFor(ctx)); err != nil {
		return Principal{}, fmt.Errorf("jwt: %w", err)
	}
	user, ok := claims[v.userClaim].(string)
	if !ok || user == "" {
		return Principal{}, fmt.Errorf("jwt: claim %q (the user id) is missing or not a non-empty string", v.userClaim)
	}
	var attrs map[string]string
	for name, claim := range v.attributes {
		value, ok := claimString(claims[claim])
		if !ok {
			continue
		}
		if attrs == nil {
			attrs = make(map[string]string, len(v.attributes))
		}
		attrs[name] = value
	}
	return Principal{User: tool.User{ID: user, Attributes: attrs}, Via: "jwt", Roles: claimRoles(claims[v.rolesClaim])}, nil
}

// claimRoles reads a roles claim: an array of strings or one space-separated
// string (as OAuth's scope). Only known roles are kept; anything else is no role.
func claimRoles(v any) []string {
	var names []string
	switch v := v.(type) {
	case string:
		names = strings.Fields(v)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				names = append(names, s)
			}
		}
	}
	var roles []string
	for _, n := range names {
		if containsString(knownRoles, n) && !containsString(roles, n) {
			roles = append(roles, n)
		}
	}
	return roles
}

// claimString formats a scalar claim; arrays, objects and null are left out like a
// missing claim, since no one string stands for them.
func claimString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case float64: // not produced with WithJSONNumber; kept for safety
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	default:
		return "", false
	}
}

// keyFor picks the key by the token's algorithm, which the parser has already
// checked against the configured ones: the HS256 secret for HS256, else a JWKS key of
// the matching type. A JWKS key never verifies an HS256 token (an RSA public key is
// public, so accepting it as an HMAC secret is the classic algorithm confusion).
func (v *jwtVerifier) keyFor(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		switch alg {
		case algHS256:
			if v.secret == nil {
				return nil, errors.New("HS256 is not configured")
			}
			return v.secret, nil
		case algRS256, algES256:
			if v.jwks == nil {
				return nil, fmt.Errorf("%s is not configured", alg)
			}
			key, err := v.jwks.KeyfuncCtx(ctx)(t)
			if err != nil {
				return nil, err
			}
			return keysFor(alg, key)
		default:
			return nil, fmt.Errorf("algorithm %q is not accepted", alg)
		}
	}
}

// keysFor keeps the keys that fit alg: RSA public keys for RS256, P-256 public keys
// for ES256. A JWKS may also hold symmetric keys; they are never used.
func keysFor(alg string, key any) (any, error) {
	fits := func(k any) bool {
		switch k := k.(type) {
		case *rsa.PublicKey:
			return alg == algRS256
		case *ecdsa.PublicKey:
			return alg == algES256 && k.Curve == elliptic.P256()
		default:
			return false
		}
	}
	switch k := key.(type) {
	case jwt.VerificationKeySet:
		var set jwt.VerificationKeySet
		for _, one := range k.Keys {
			if fits(one) {
				set.Keys = append(set.Keys, one)
			}
		}
		if len(set.Keys) == 0 {
			return nil, fmt.Errorf("no %s key in the JWKS", alg)
		}
		return set, nil
	default:
		if !fits(k) {
			return nil, fmt.Errorf("the JWKS key named by kid is not a %s key", alg)
		}
		return k, nil
	}
}

// jwksFromFile reads a JWKS file once, keeping only its RSA and P-256 public keys
// (private keys are reduced to their public halves).
func jwksFromFile(path string) (keyfunc.Keyfunc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%s: not a JWKS: %w", path, err)
	}
	store := jwkset.NewMemoryStorage()
	usable := 0
	for i, m := range set.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: keys[%d]: %w", path, i, err)
		}
		if _, err := keysFor(algRS256, publicHalf(k.Key())); err == nil {
			usable++
		} else if _, err := keysFor(algES256, publicHalf(k.Key())); err == nil {
			usable++
		}
		if err := store.KeyWrite(context.Background(), k); err != nil {
			return nil, fmt.Errorf("%s: keys[%d]: %w", path, i, err)
		}
	}
	if usable == 0 {
		return nil, fmt.Errorf("%s has no RSA or P-256 key", path)
	}
	return keyfunc.New(keyfunc.Options{Storage: store})
}

func publicHalf(key any) any {
	if k, ok := key.(interface{ Public() crypto.PublicKey }); ok {
		return k.Public()
	}
	return key
}

// jwksFromURL fetches the JWKS now (an unreachable or malformed one is a startup
// error, not a server that rejects every token) and refreshes it in the background
// until stop is called.
func jwksFromURL(raw string) (keyfunc.Keyfunc, func(), error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, nil, fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		// A key server on the same host cannot be tampered with in transit.
	default:
		return nil, nil, fmt.Errorf("%q: want https (http only for localhost), since whoever can alter the keys can mint tokens", raw)
	}
	ctx, cancel := context.WithCancel(context.Background())
	noErrorFirst := false
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{raw}, keyfunc.Override{
		Client:                    &http.Client{Timeout: jwksFetchTimeout},
		HTTPTimeout:               jwksFetchTimeout,
		NoErrorReturnFirstHTTPReq: &noErrorFirst,
		RateLimitWaitMax:          jwksFetchTimeout,
		RefreshInterval:           jwksRefreshInterval,
	})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return kf, cancel, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
