package serve

import (
	"bytes"
	"time"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// Config is serve.yaml: how the server authenticates and what it limits.
type Config struct {
	Addr   string     `yaml:"addr"`
	Auth   AuthConfig `yaml:"auth"`
	Limits Limits     `yaml:"limits"`
	// GracePeriod is how long in-flight runs may finish after SIGTERM.
	GracePeriod time.Duration `yaml:"grace_period"`
	// LogMessages puts inputs and answers into the access log (off: never).
	LogMessages bool `yaml:"log_messages"`
	// Approvals configures the handling of runs paused for approval.
	Approvals ApprovalsConfig `yaml:"approvals"`
	// CORS lets web pages of other origins call the API; off by default.
	CORS CORSConfig `yaml:"cors"`
}

// ApprovalsConfig is how the server looks after runs paused for approval.
type ApprovalsConfig struct {
	// SweepInterval is how often the server looks for paused runs whose approvals
	// expired, to resume them with approval.on_timeout; default 30s.
	SweepInterval time.Duration `yaml:"sweep_interval"`
}

// DefaultSweepInterval is ApprovalsConfig.SweepInterval's default.
const DefaultSweepInterval = 30 * time.Second

// RoleApprover may decide on the calls of any user's paused runs, and see them.
const RoleApprover = "approver"

// knownRoles are the roles a principal may have.
var knownRoles = []string{RoleApprover}

// AuthConfig says how requests are authenticated. Any of the ways may be
// configured; a request is accepted by the first that recognises its credentials.
type AuthConfig struct {
	// Tokens are static bearer tokens, stored as the hex SHA-256 of the token.
	Tokens []TokenConfig `yaml:"tokens"`
	// JWT accepts signed JSON Web Tokens.
	JWT *JWTConfig `yaml:"jwt"`
}

// TokenConfig is one static bearer token and the user it stands for.
type TokenConfig struct {
	SHA256     string            `yaml:"sha256"` // hex SHA-256 of the token
	User       string            `yaml:"user"`
	Attributes map[string]string `yaml:"attributes"`
	// Roles are the principal's roles: approver.
	Roles []string `yaml:"roles"`
}

// JWTConfig accepts JSON Web Tokens signed with HS256 (a secret from an environment
// variable) or RS256/ES256 (keys from a JWKS file or URL).
type JWTConfig struct {
	HS256SecretEnv string `yaml:"hs256_secret_env"`
	JWKSFile       string `yaml:"jwks_file"`
	JWKSURL        string `yaml:"jwks_url"`
	Issuer         string `yaml:"issuer"`   // required
	Audience       string `yaml:"audience"` // required
	// UserClaim is the claim holding the user id; default "sub".
	UserClaim string `yaml:"user_claim"`
	// Attributes maps context.user attributes to claims: {tier: plan}.
	Attributes map[string]string `yaml:"attributes"`
	// RolesClaim is the claim holding the principal's roles (an array of strings,
	// or one space-separated string); default "roles". Only approver means anything.
	RolesClaim string `yaml:"roles_claim"`
	// Leeway tolerates clock skew in exp and nbf; default 30s.
	Leeway time.Duration `yaml:"leeway"`
}

// Limits protect the server and its users from each other.
type Limits struct {
	// RatePerSecond and Burst are each principal's token bucket for runs.
	RatePerSecond float64 `yaml:"rate_per_second"`
	Burst         int     `yaml:"burst"`
	// MaxConcurrentPerUser and MaxConcurrent cap the runs in flight.
	MaxConcurrentPerUser int `yaml:"max_concurrent_per_user"`
	MaxConcurrent        int `yaml:"max_concurrent"`
	// MaxBodyBytes caps a request body (413 beyond); MaxInputChars a run's input.
	MaxBodyBytes  int64 `yaml:"max_body_bytes"`
	MaxInputChars int   `yaml:"max_input_chars"`
	// MaxAttachmentBytes caps the files of a run (each, and all of them) sent to
	// the run API or chat completions, whose bodies may be larger by as much in
	// base64.
	MaxAttachmentBytes int64 `yaml:"max_attachment_bytes"`
	// RunTimeout is a run's deadline (besides the spec's guards.max_run_time).
	RunTimeout time.Duration `yaml:"run_timeout"`
	// ReadTimeout bounds how long a client may take to send a request, its
	// headers and its body.
	ReadTimeout time.Duration `yaml:"read_timeout"`
}

// Principal is who a request acts for: the run context's user.
type Principal struct {
	User tool.User
	// Via names the credential for logs, never the credential itself: "token
	// alice", "jwt", "insecure".
	Via string
	// Roles are the principal's roles (RoleApprover).
	Roles []string
}

// Approver reports whether p may decide on (and see) any user's paused runs.
func (p Principal) Approver() bool { return containsString(p.Roles, RoleApprover) }

// DefaultAddr is where serve listens unless told otherwise: this machine only.
const DefaultAddr = "127.0.0.1:8080"

// DefaultGracePeriod is how long in-flight runs may finish after SIGTERM.
const DefaultGracePeriod = 30 * time.Second

// LoadConfig reads serve.yaml; "" is the empty config. Every problem — YAML, an
// unknown key (with a suggestion), a value of the wrong type or range, a duration
// that does not parse, the checks of checkConfig — comes back at once as
// spec.Diagnostics at its line, as validate prints them.
func LoadConfig(path string) (Config, error) {
	var c Config
	if path != "" {
		data, err := spec.ReadFile(path, spec.MaxFileSize)
		if err != nil {
			return c, err
		}
		if diags := CheckConfig(path, data, &c); diags.HasErrors() {
			return c, diags
		}
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.GracePeriod == 0 {
		c.GracePeriod = DefaultGracePeriod
	}
	return c, nil
}

// CheckConfig checks serve.yaml's text and decodes it into c: what LoadConfig and
// `agentrun validate serve.yaml` report. An empty file is the empty config.
func CheckConfig(path string, src []byte, c *Config) spec.Diagnostics {
	if len(bytes.TrimSpace(src)) == 0 {
		return nil
	}
	l, err := spec.NewLoader()
	if err != nil {
		return spec.Diagnostics{{Severity: spec.Error, Pos: spec.Pos{File: path}, Message: err.Error()}}
	}
	f, decoded := l.LoadServeConfig(path, src, c)
	if decoded {
		checkConfig(f, c)
	}
	return f.Diagnostics()
}
