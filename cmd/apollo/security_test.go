package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// inProcess runs runServer in the test process and returns its address and
// a stop function that returns runServer's error.
func inProcess(t *testing.T, cfg config.Config) (addr string, logs *syncBuffer, stop func() error) {
	t.Helper()
	return inProcessWith(t, cfg, nil)
}

// inProcessWith is inProcess on clock (nil: the system clock).
func inProcessWith(t *testing.T, cfg config.Config, clock apollo.Clock) (addr string, logs *syncBuffer, stop func() error) {
	t.Helper()
	logs = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, cfg, serverDeps{log: slog.New(slog.NewTextHandler(logs, nil)), clock: clock, ready: func(a string) { up <- a }})
	}()
	select {
	case addr = <-up:
	case err := <-done:
		cancel()
		t.Fatalf("server did not start: %v", err)
	case <-time.After(testwait.Timeout(t)):
		cancel()
		t.Fatal("server not up")
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return addr, logs, stop
}

func testConfig(t *testing.T) config.Config {
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

func TestRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Listen = "0.0.0.0:0"
	err := runServer(context.Background(), cfg, serverDeps{log: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "refusing to listen on 0.0.0.0:0 without tokens") || !strings.Contains(err.Error(), "apollo token create") {
		t.Fatalf("got %v", err)
	}
	// --insecure-no-auth starts, and warns.
	cfg.Auth.InsecureNoAuth = true
	_, logs, stop := inProcess(t, cfg)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "WITHOUT authentication") {
		t.Errorf("no warning in %s", logs)
	}
}

func TestTokensTLSAndNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.TLS.Cert, cfg.TLS.Key = writeSelfSigned(t)
	secret, tok, _ := httpapi.NewToken("ops", httpapi.RoleAdmin, "")
	cfg.Auth.Tokens = []config.Token{{Name: "ops", Role: "admin", SHA256: fmt.Sprintf("%x", tok.Hash)}}
	cfg.Listen = "0.0.0.0:0" // allowed: tokens are configured
	addr, logs, stop := inProcess(t, cfg)
	_, port, _ := net.SplitHostPort(addr)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, cfg.TLS.Cert)}}}
	url := "https://localhost:" + port
	do := func(token, path string) int {
		req, _ := http.NewRequest("GET", url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do(secret, "/api/v1/tasks"); st != 200 {
		t.Errorf("good token over TLS: %d", st)
	}
	wrong := "apl_thisisnotavalidtokenbutlookslikeone"
	if st := do(wrong, "/api/v1/tasks"); st != 401 {
		t.Errorf("wrong token: %d", st)
	}
	if st := do("", "/api/v1/tasks"); st != 401 {
		t.Errorf("no token: %d", st)
	}
	if st := do(secret, "/api/v1/audit"); st != 200 {
		t.Errorf("audit: %d", st)
	}
	if resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", port) + "/healthz"); err == nil && resp.StatusCode != 400 {
		t.Errorf("plain HTTP on the TLS port: %d", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Failed authentications are the server's own entries: server.jsonl.
	tenants, _ := os.ReadFile(filepath.Join(cfg.Data, "audit", "audit.jsonl"))
	server, _ := os.ReadFile(filepath.Join(cfg.Data, "audit", "server.jsonl"))
	audit := append(tenants, server...)
	if !strings.Contains(string(audit), "auth.fail") {
		t.Errorf("failed authentication not audited: %s", audit)
	}
	for name, text := range map[string]string{"logs": logs.String(), "audit": string(audit)} {
		if strings.Contains(text, secret) || strings.Contains(text, wrong) {
			t.Errorf("a secret appears in the %s", name)
		}
	}
}

func writeSelfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

func certPool(t *testing.T, certFile string) *x509.CertPool {
	b, _ := os.ReadFile(certFile)
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatal("bad cert")
	}
	return p
}

func TestTokenCreate(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	code := run(context.Background(), []string{"token", "create", "--name", "ci", "--role", "agent", "--tenant", "data"}, nil, &out, &out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	text := out.String()
	var secret string
	for _, f := range strings.Fields(text) {
		if strings.HasPrefix(f, httpapi.TokenPrefix) {
			secret = f
		}
	}
	if secret == "" || !strings.Contains(text, "role: agent") || !strings.Contains(text, `tenant: "data"`) {
		t.Fatalf("output:\n%s", text)
	}
	// The printed hash accepts the printed secret.
	i := strings.Index(text, "sha256: ")
	h, err := httpapi.ParseTokenHash(text[i+8 : i+8+64])
	if err != nil {
		t.Fatal(err)
	}
	a := httpapi.NewTokenAuth([]httpapi.Token{{Name: "ci", Hash: h, Role: httpapi.RoleAgent, Tenant: "data"}})
	req, _ := http.NewRequest("POST", "/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	if p, err := a.Authenticate(req); err != nil || p.Tenant != "data" || p.Role != httpapi.RoleAgent {
		t.Fatalf("the printed line does not accept the secret: %v %v", p, err)
	}
	if code := run(context.Background(), []string{"token", "create", "--role", "root"}, nil, &out, &out); code == 0 {
		t.Error("unknown role accepted")
	}
}

// The CLI against a server whose certificate it does not trust says what
// to do (give the CA with SSL_CERT_FILE, or use the certificate's name),
// and with SSL_CERT_FILE it connects.
func TestCLIWithASelfSignedCertificate(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.TLS.Cert, cfg.TLS.Key = writeSelfSigned(t)
	addr, _, stop := inProcess(t, cfg)
	t.Cleanup(func() { stop() })
	_, port, _ := net.SplitHostPort(addr)
	run := func(server string, env ...string) (int, string) {
		cmd := exec.Command(os.Args[0], "status", "--server", server)
		cmd.Env = append(append(os.Environ(), "APOLLO_TEST_MAIN=1"), env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	if code, out := run("https://localhost:" + port); code != 1 || !strings.Contains(out, "give its CA with SSL_CERT_FILE") {
		t.Errorf("untrusted certificate: exit %d:\n%s", code, out)
	}
	if code, out := run("https://127.0.0.1:"+port, "SSL_CERT_FILE="+cfg.TLS.Cert); code != 1 || !strings.Contains(out, "the server's certificate is for another name") {
		t.Errorf("a certificate for another name: exit %d:\n%s", code, out)
	}
	if code, out := run("https://localhost:"+port, "SSL_CERT_FILE="+cfg.TLS.Cert); code != 0 || !strings.Contains(out, "ready") {
		t.Errorf("with SSL_CERT_FILE: exit %d:\n%s", code, out)
	}
}

// The line apollo token create prints is the token it made, whatever its
// name, tenant and job prefix hold: loaded as apollo.yaml it gives back
// the same fields. Before, the name was printed bare, so a name such as
// "ci, role: admin" wrote a line that read as another role (or did not
// read), and a job prefix went into the ping URL unescaped.
func TestTokenCreateLineIsTheToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, tenant, prefix string }{
		{"ci, role: admin", "data", ""},
		{`a "quoted" name: x`, `t"1`, "backup: nightly"},
		{"#hash {brace} [list]", "", "a b/c?d"},
		{"夜间 tab\there", "租户", "备份"},
	} {
		var out bytes.Buffer
		args := []string{"token", "create", "--name", tc.name, "--role", "agent", "--tenant", tc.tenant}
		if tc.prefix != "" {
			args = append(args, "--job-prefix", tc.prefix)
		}
		if code := run(context.Background(), args, nil, &out, &out); code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.name, code, out.String())
		}
		var line, ping string
		for l := range strings.Lines(out.String()) {
			switch {
			case strings.HasPrefix(l, "  - {"):
				line = l
			case strings.HasPrefix(l, "Ping URL"):
				ping = l
			}
		}
		path := filepath.Join(t.TempDir(), "apollo.yaml")
		if err := os.WriteFile(path, []byte("auth:\n  tokens:\n"+line), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%q: the printed line does not load: %v\n%s", tc.name, err, line)
		}
		if got := cfg.Auth.Tokens; len(got) != 1 || got[0].Name != tc.name || got[0].Role != "agent" || got[0].Tenant != tc.tenant || got[0].JobPrefix != tc.prefix {
			t.Fatalf("%q: the printed line reads as %+v\n%s", tc.name, got, line)
		}
		if tc.prefix != "" && !strings.Contains(ping, "/ping/"+url.PathEscape(tc.prefix)+"JOB?key=") {
			t.Fatalf("%q: the ping URL does not escape the job prefix: %s", tc.name, ping)
		}
	}
}
