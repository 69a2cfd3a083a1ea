package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

// Anyone who can reach a TLS port can fail a handshake: the server's log
// has a line for the first failure of a minute and counts the rest, so a
// stream of them from a scanner or an attacker cannot flood it. The HTTP
// server's own error log wrote one WARN line per failed handshake.
func TestFailedHandshakesDoNotFloodTheLog(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.TLS.Cert, cfg.TLS.Key = writeSelfSigned(t)
	for _, tenant := range []string{"a", "b"} {
		_, tok, _ := httpapi.NewToken("ops", httpapi.RoleAdmin, tenant)
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: "ops", Role: "admin", Tenant: tenant, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	addr, logs, _ := inProcess(t, cfg)
	const n = 200
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "\x16\x03\x01\x00\x05garbage %d\r\n", i) // a record header, then not a ClientHello
		buf := make([]byte, 64)
		c.Read(buf) // the server's alert, or its close: the handshake has failed
		c.Close()
	}
	// A request after them: its handshake ended before it was answered, so
	// every failed one before it has been logged.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, cfg.TLS.Cert)}}}
	_, port, _ := net.SplitHostPort(addr)
	resp, err := client.Get("https://localhost:" + port + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	lines := strings.Count(logs.String(), "TLS handshake error")
	if lines == 0 || lines > 2 {
		t.Errorf("%d failed handshakes wrote %d log lines, want 1 or 2:\n%s", n, lines, logs)
	}
}
