package main

import (
	"io"
	"net/http"
	"testing"
)

// The names a server without tokens answers to come from the
// configuration: auth.allowed_hosts and the host of external_url; other
// names are refused (DNS rebinding, docs/security.md).
func TestAllowedHostsFromConfig(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Auth.AllowedHosts = []string{"*.proxy.example"}
	cfg.ExternalURL = "https://apollo.example.com/"
	addr, _, _ := inProcess(t, cfg)
	for host, want := range map[string]int{
		"dash.proxy.example": 200, "apollo.example.com:443": 200, addr: 200, "localhost": 200,
		"evil.example": 403, "proxy.example": 403,
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/tasks", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d %s, want %d", host, resp.StatusCode, body, want)
		}
	}
}
