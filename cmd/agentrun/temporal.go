package main

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
)

// The environment variables the Temporal CLI and SDKs read for a secured
// cluster (their "environment configuration"): a process set up for the
// `temporal` CLI reaches the same cluster here.
const (
	envTemporalTLS        = "TEMPORAL_TLS"
	envTemporalTLSCert    = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	envTemporalTLSKey     = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	envTemporalTLSCA      = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	envTemporalServerName = "TEMPORAL_TLS_SERVER_NAME"
	envTemporalAPIKey     = "TEMPORAL_API_KEY"
)

// temporalTLS is how a client proves itself to a secured cluster and checks
// the cluster's certificate: TLS (mutual with a client certificate) and an API
// key, which only ever comes from the environment, by name.
type temporalTLS struct {
	enabled                   optionalBool
	cert, key, ca, serverName string
	apiKeyEnv                 string
}

func (t *temporalTLS) add(f *pflag.FlagSet) {
	f.Var(&t.enabled, "temporal-tls", "TLS to the cluster with the system's root certificates (default: TEMPORAL_TLS, else on when any TLS flag or an API key is given; --temporal-tls=false turns it off)")
	f.Lookup("temporal-tls").NoOptDefVal = "true"
	f.StringVar(&t.cert, "temporal-tls-cert", "", "the client certificate for mutual TLS, PEM `FILE` (default: "+envTemporalTLSCert+")")
	f.StringVar(&t.key, "temporal-tls-key", "", "the client certificate's private key, PEM `FILE` (default: "+envTemporalTLSKey+")")
	f.StringVar(&t.ca, "temporal-tls-ca", "", "the CA certificates that sign the cluster's certificate, PEM `FILE` (default: "+envTemporalTLSCA+", else the system's roots)")
	f.StringVar(&t.serverName, "temporal-tls-server-name", "", "the name the cluster's certificate must carry (default: "+envTemporalServerName+", else the host of --temporal)")
	f.StringVar(&t.apiKeyEnv, "temporal-api-key-env", "", "the environment variable `NAME` that holds the API key, sent as a bearer token (default: "+envTemporalAPIKey+")")
}

// flags are the TLS flags given, for a printed command that must reach the
// same cluster; what came from the environment is found there again.
func (t *temporalTLS) flags() []string {
	var out []string
	if t.enabled.set {
		out = append(out, "--temporal-tls="+strconv.FormatBool(t.enabled.value))
	}
	for _, f := range []struct{ name, value string }{
		{"--temporal-tls-cert", t.cert}, {"--temporal-tls-key", t.key}, {"--temporal-tls-ca", t.ca},
		{"--temporal-tls-server-name", t.serverName}, {"--temporal-api-key-env", t.apiKeyEnv},
	} {
		if f.value != "" {
			out = append(out, f.name, f.value)
		}
	}
	return out
}

// apply sets the connection's TLS and credentials from the flags, else the
// environment. TLS is on when asked for, or when a certificate, a CA, a server
// name or an API key is given, as the Temporal CLI has it.
func (t *temporalTLS) apply(o *client.Options) error {
	enabled, explicit, err := t.enabled.orEnv(envTemporalTLS)
	if err != nil {
		return err
	}
	cert, key := orEnv(t.cert, envTemporalTLSCert), orEnv(t.key, envTemporalTLSKey)
	ca, serverName := orEnv(t.ca, envTemporalTLSCA), orEnv(t.serverName, envTemporalServerName)
	keyEnv := cmp.Or(t.apiKeyEnv, envTemporalAPIKey)
	apiKey := os.Getenv(keyEnv)
	if t.apiKeyEnv != "" && apiKey == "" {
		return fmt.Errorf("--temporal-api-key-env: %s is not set", keyEnv)
	}
	if apiKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
	}
	configured := cert != "" || key != "" || ca != "" || serverName != ""
	switch {
	case explicit && !enabled && configured:
		return errors.New("--temporal-tls=false (or TEMPORAL_TLS=false) with a TLS certificate, CA or server name: drop one or the other")
	case explicit && !enabled:
		o.ConnectionOptions.TLSDisabled = true // an API key then goes in plain text, as asked
		return nil
	case !enabled && !configured && apiKey == "":
		return nil
	}
	cfg, err := tlsConfig(cert, key, ca, serverName)
	if err != nil {
		return err
	}
	o.ConnectionOptions.TLS = cfg
	return nil
}

// tlsConfig is a client's TLS configuration: its certificate for mutual TLS,
// the CA that signs the server's (else the system's roots) and the name the
// server's certificate must carry (else the address's host).
func tlsConfig(cert, key, ca, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("--temporal-tls-cert and --temporal-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case cert != "" || key != "":
		return nil, errors.New("a client certificate needs its key and a key its certificate: give --temporal-tls-cert and --temporal-tls-key together")
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("--temporal-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--temporal-tls-ca: %s holds no PEM certificate", ca)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func orEnv(flag, env string) string { return cmp.Or(flag, os.Getenv(env)) }

// optionalBool is a boolean flag that knows whether it was given, so that an
// explicit false can override what other settings imply.
type optionalBool struct{ value, set bool }

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.value, b.set = v, true
	return nil
}

func (b *optionalBool) String() string   { return strconv.FormatBool(b.value) }
func (b *optionalBool) Type() string     { return "bool" }
func (b *optionalBool) IsBoolFlag() bool { return true }

// orEnv is the flag's value if given, else the environment variable's; explicit
// says either was set.
func (b *optionalBool) orEnv(env string) (value, explicit bool, err error) {
	if b.set {
		return b.value, true, nil
	}
	s, ok := os.LookupEnv(env)
	if !ok || s == "" {
		return false, false, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, false, fmt.Errorf("%s=%q: want true or false", env, s)
	}
	return v, true, nil
}
