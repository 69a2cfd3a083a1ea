package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// TestTUIFindsItsServerInCLIConfig: apollo tui, given neither --server
// nor APOLLO_SERVER, watches the server that cli.yaml names, with the
// file's token, as every command that talks to a server does
// (docs/cli.md); tenant a's token shows a's jobs and not b's. Before, the
// dashboard read only the flags and the environment: it went to
// 127.0.0.1:1969 without a token.
func TestTUIFindsItsServerInCLIConfig(t *testing.T) {
	cleanEnv(t) // not parallel: the environment and tuiProgramOptions
	t.Setenv("NO_COLOR", "1")
	cfg := testConfig(t)
	secrets := map[string]string{}
	for _, tenant := range []string{"a", "b"} {
		secret, tok, err := httpapi.NewToken("ops-"+tenant, httpapi.RoleAdmin, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant] = secret
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: "ops-" + tenant, Role: "admin", Tenant: tenant, SHA256: fmt.Sprintf("%x", tok.Hash)})
	}
	addr, _, _ := inProcess(t, cfg)
	now := time.Now().UnixMilli()
	for tenant, job := range map[string]string{"a": "alpha_job", "b": "beta_job"} {
		body := fmt.Sprintf(`{"taskID":"%s-1","name":"%s","sequence":1,"status":"failed","ts":%d}`, job, job, now)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secrets[tenant])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(b, []byte(`"result":"accepted"`)) {
			t.Fatalf("reporting as %s: %d %s", tenant, resp.StatusCode, b)
		}
	}
	dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "apollo")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := fmt.Sprintf("server: http://%s\ntoken: %s\n", addr, secrets["a"])
	if err := os.WriteFile(filepath.Join(dir, "cli.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}

	in, keys := io.Pipe()
	defer keys.Close()
	screen := &syncBuffer{}
	tuiProgramOptions = []tea.ProgramOption{tea.WithInput(in), tea.WithOutput(screen), tea.WithWindowSize(120, 40)}
	t.Cleanup(func() { tuiProgramOptions = nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"tui"}, nil, &stdout, &stderr) }()

	deadline := time.Now().Add(testwait.Timeout(t))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s := screen.String(); !strings.Contains(s, "ops-a (admin) @a") || !strings.Contains(s, "alpha_job"); s = screen.String() {
		select {
		case code := <-done:
			t.Fatalf("apollo tui exited %d before showing tenant a's board: %s\nscreen:\n%s", code, stderr.String(), s)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("apollo tui did not show ops-a (admin) @a and alpha_job on its board; stderr: %s\nscreen:\n%s", stderr.String(), s)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("apollo tui exited %d: %s", code, stderr.String())
	}
	if strings.Contains(screen.String(), "beta_job") {
		t.Errorf("tenant a's dashboard showed tenant b's job:\n%s", screen.String())
	}
}
