package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/rpc/encryption"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

// testPKI is a CA, the frontend's certificate for 127.0.0.1 and a client
// certificate it signed, and a second CA that signed nothing the server
// shows; the PEM files are in a test's temporary directory.
type testPKI struct {
	ca                    *x509.CertPool
	server, client        tls.Certificate
	caFile, otherCAFile   string
	clientCert, clientKey string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{ca: x509.NewCertPool()}
	caCert, caKey := makeCert(t, nil, nil, &x509.Certificate{Subject: pkix.Name{CommonName: "agentrun test CA"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true})
	p.ca.AddCert(caCert)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw)
	other, _ := makeCert(t, nil, nil, &x509.Certificate{Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true})
	p.otherCAFile = writePEM(t, dir, "other-ca.pem", "CERTIFICATE", other.Raw)

	serverCert, serverKey := makeCert(t, caCert, caKey, &x509.Certificate{Subject: pkix.Name{CommonName: "temporal frontend"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	p.server = tls.Certificate{Certificate: [][]byte{serverCert.Raw}, PrivateKey: serverKey}
	clientCert, clientKey := makeCert(t, caCert, caKey, &x509.Certificate{Subject: pkix.Name{CommonName: "agentrun worker"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	p.client = tls.Certificate{Certificate: [][]byte{clientCert.Raw}, PrivateKey: clientKey}
	p.clientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert.Raw)
	der, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = writePEM(t, dir, "client-key.pem", "PRIVATE KEY", der)
	return p
}

// makeCert makes a certificate from tmpl, signed by parent (self-signed when nil).
func makeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// frontendTLS makes the test server's frontend speak mutual TLS only: a
// client must show a certificate the test CA signed. The server's own
// services reach the frontend with the client certificate; between them
// there is no TLS.
type frontendTLS struct{ pki *testPKI }

var _ encryption.TLSConfigProvider = frontendTLS{}

func (f frontendTLS) GetFrontendServerConfig() (*tls.Config, error) {
	return &tls.Config{Certificates: []tls.Certificate{f.pki.server}, ClientCAs: f.pki.ca, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

func (f frontendTLS) GetFrontendClientConfig() (*tls.Config, error) {
	return &tls.Config{Certificates: []tls.Certificate{f.pki.client}, RootCAs: f.pki.ca, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, nil
}

func (frontendTLS) GetInternodeServerConfig() (*tls.Config, error)           { return nil, nil }
func (frontendTLS) GetInternodeClientConfig() (*tls.Config, error)           { return nil, nil }
func (frontendTLS) GetRemoteClusterClientConfig(string) (*tls.Config, error) { return nil, nil }
func (frontendTLS) GetExpiringCerts(time.Duration) (encryption.CertExpirationMap, encryption.CertExpirationMap, error) {
	return nil, nil, nil
}

// bearerTokens records the Authorization headers the frontend was sent,
// allowing every call.
type bearerTokens struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (b *bearerTokens) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[info.AuthToken] = true
	return &authorization.Claims{System: authorization.RoleAdmin}, nil
}

func (b *bearerTokens) sent(token string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[token]
}

// On a cluster whose frontend speaks mutual TLS only, a worker given the CA,
// the client certificate and an API key in the Temporal CLI's environment
// variables, and `exec --engine temporal` given them as flags, complete a run;
// both sent their API key. Without TLS, with a CA that did not sign the
// server's certificate, or without a client certificate, exec fails with exit
// 1 and says why, never showing the API key.
func TestTemporalOverMutualTLS(t *testing.T) {
	bin := agentrunBinary(t)
	pki := newTestPKI(t)
	tokens := &bearerTokens{}
	ts := temporaltest.NewServer(temporaltest.WithT(t),
		temporaltest.WithBaseServerOptions(
			temporal.WithTLSConfigFactory(frontendTLS{pki}),
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return tokens }),
			temporal.WithAuthorizer(authorization.NewNoopAuthorizer())))
	desktest.Start(t)
	spec, _ := filepath.Abs(deskSpec)
	store := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	cluster := []string{"--temporal", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace(), "--task-queue", "desk-tls"}
	const workerKey, execKey = "worker-key-5f1d0c", "exec-key-9a8b7c"

	var workerOut syncBuffer
	worker := exec.Command(bin, append(append([]string{"worker", "--store", store}, cluster...), spec)...)
	worker.Env = append(os.Environ(), "TEMPORAL_TLS_SERVER_CA_CERT_PATH="+pki.caFile,
		"TEMPORAL_TLS_CLIENT_CERT_PATH="+pki.clientCert, "TEMPORAL_TLS_CLIENT_KEY_PATH="+pki.clientKey, "TEMPORAL_API_KEY="+workerKey)
	worker.Stdout, worker.Stderr = &workerOut, &workerOut
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })

	execWith := func(tlsFlags ...string) (code int, stdout, stderr string) {
		t.Helper()
		args := append(append(append([]string{"exec", "--engine", "temporal", "--user", "u-1", "--store", store}, cluster...), tlsFlags...),
			spec, "A1 arrived broken; and A2?")
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "DESK_TEMPORAL_KEY="+execKey, "TEMPORAL_API_KEY="+execKey)
		return runCommand(t, cmd)
	}
	secured := []string{"--temporal-tls-ca", pki.caFile, "--temporal-tls-cert", pki.clientCert, "--temporal-tls-key", pki.clientKey,
		"--temporal-api-key-env", "DESK_TEMPORAL_KEY"}
	code, stdout, stderr := execWith(secured...)
	if code != 0 || strings.TrimSpace(stdout) != desktest.Answer {
		t.Fatalf("exec over mutual TLS: exit %d, answer %q\n%s\nworker: %s", code, stdout, stderr, workerOut.String())
	}
	if !tokens.sent("Bearer "+workerKey) || !tokens.sent("Bearer "+execKey) {
		t.Errorf("the frontend was not sent both API keys")
	}

	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"no TLS", []string{"--temporal-tls=false"}, "temporal at " + ts.GetFrontendHostPort() + ": failed reaching server: connection error"},
		{"a CA that did not sign the server's certificate", []string{"--temporal-tls-ca", pki.otherCAFile,
			"--temporal-tls-cert", pki.clientCert, "--temporal-tls-key", pki.clientKey}, "certificate signed by unknown authority"},
		{"no client certificate", []string{"--temporal-tls-ca", pki.caFile}, "no client certificate was shown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := execWith(tt.flags...)
			if code != 1 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, want 1 with %q:\n%s", code, tt.want, stderr)
			}
			if strings.Contains(stderr, execKey) {
				t.Errorf("the API key is shown:\n%s", stderr)
			}
		})
	}
	if strings.Contains(workerOut.String(), workerKey) {
		t.Errorf("the worker showed its API key:\n%s", workerOut.String())
	}
}

// The TLS settings come from the flags, else the Temporal CLI's variables; TLS
// is on when asked for or implied by any TLS setting or an API key, and off
// only when turned off; what cannot work is refused before anything is dialed,
// and no error shows the API key.
func TestTemporalTLSSettings(t *testing.T) {
	pki := newTestPKI(t)
	const key = "tk-3c9e1d"
	tests := []struct {
		name      string
		env       map[string]string
		flags     []string
		wantTLS   bool
		wantCerts int
		wantCA    bool
		wantKey   bool
		wantErr   string
	}{
		{name: "nothing: plain gRPC"},
		{name: "--temporal-tls: the system's roots", flags: []string{"--temporal-tls"}, wantTLS: true},
		{name: "TEMPORAL_TLS=true", env: map[string]string{"TEMPORAL_TLS": "true"}, wantTLS: true},
		{name: "an API key turns TLS on", env: map[string]string{"TEMPORAL_API_KEY": key}, wantTLS: true, wantKey: true},
		{name: "an API key over plain gRPC when TLS is turned off", env: map[string]string{"TEMPORAL_API_KEY": key, "TEMPORAL_TLS": "false"}, wantKey: true},
		{name: "mutual TLS from the environment", env: map[string]string{"TEMPORAL_TLS_CLIENT_CERT_PATH": pki.clientCert,
			"TEMPORAL_TLS_CLIENT_KEY_PATH": pki.clientKey, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": pki.caFile}, wantTLS: true, wantCerts: 1, wantCA: true},
		{name: "the flags before the environment", env: map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/nonexistent/ca.pem"},
			flags: []string{"--temporal-tls-ca", pki.caFile}, wantTLS: true, wantCA: true},
		{name: "a named key variable", env: map[string]string{"DESK_KEY": key}, flags: []string{"--temporal-api-key-env", "DESK_KEY"}, wantTLS: true, wantKey: true},
		{name: "a named key variable that is not set", env: map[string]string{"TEMPORAL_API_KEY": key}, flags: []string{"--temporal-api-key-env", "DESK_KEY"},
			wantErr: "--temporal-api-key-env: DESK_KEY is not set"},
		{name: "a certificate without its key", flags: []string{"--temporal-tls-cert", pki.clientCert}, wantErr: "give --temporal-tls-cert and --temporal-tls-key together"},
		{name: "TLS off with a CA", flags: []string{"--temporal-tls=false", "--temporal-tls-ca", pki.caFile}, wantErr: "--temporal-tls=false"},
		{name: "a CA file that is no PEM", flags: []string{"--temporal-tls-ca", pki.clientKey}, wantErr: "holds no PEM certificate"},
		{name: "TEMPORAL_TLS that is no boolean", env: map[string]string{"TEMPORAL_TLS": "yes please", "TEMPORAL_API_KEY": key}, wantErr: `TEMPORAL_TLS="yes please"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []string{"TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
				"TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_API_KEY", "DESK_KEY"} {
				t.Setenv(v, tt.env[v])
			}
			var tf temporalFlags
			f := pflag.NewFlagSet("test", pflag.ContinueOnError)
			tf.add(f, true)
			if err := f.Parse(tt.flags); err != nil {
				t.Fatal(err)
			}
			var o client.Options
			err := tf.tls.apply(&o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), key) {
					t.Fatalf("error %v, want one with %q (and without the key)", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := o.ConnectionOptions.TLS
			if (cfg != nil) != tt.wantTLS || cfg != nil && (len(cfg.Certificates) != tt.wantCerts || (cfg.RootCAs != nil) != tt.wantCA) {
				t.Errorf("TLS %+v", cfg)
			}
			if (o.Credentials != nil) != tt.wantKey {
				t.Errorf("credentials %v, want an API key: %v", o.Credentials, tt.wantKey)
			}
			if o.ConnectionOptions.TLSDisabled != (tt.env["TEMPORAL_TLS"] == "false") {
				t.Errorf("TLSDisabled %v", o.ConnectionOptions.TLSDisabled)
			}
		})
	}
}
