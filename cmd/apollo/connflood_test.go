package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo/apiclient"
)

// One anonymous client opened a few hundred connections to a server with
// tokens, asked each for /healthz (public) and kept it open, or sent half
// a request header: the process could open 256 files, every one went to
// these connections ("accept4: too many open files"), and a reporter with
// a good token waited two minutes (the idle timeout) for its event to be
// taken, with no log line or counter saying why. Now the server holds at
// most limits.connections connections (lowered to fit the file limit);
// past it, a new connection closes the one that has waited longest for a
// request, and the reporter's events go through during the flood.
func TestConnectionFloodLeavesRoomForReporters(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("needs prlimit (util-linux) to lower the server's file limit")
	}
	cfg := testConfig(t)
	cfg.Listen = freeAddr(t)
	secrets := figureTokens(t, &cfg, "agent-a agent team-a", "agent-b agent team-b", "ops viewer")
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(cfg.Data, "apollo.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	const files = 256
	srv := startCmd(t, exec.Command("prlimit", fmt.Sprintf("--nofile=%d:%d", files, files), os.Args[0], "server", "--config", file),
		apiclient.ReadyPrefix)

	// The flood: more connections than the process may open files, half
	// of them idle after one public request, half stuck in their header.
	var flood []net.Conn
	t.Cleanup(func() {
		for _, c := range flood {
			c.Close()
		}
	})
	for i := range 2 * files {
		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		flood = append(flood, c)
		req := "GET /healthz HTTP/1.1\r\nHost: apollo\r\n\r\n"
		if i%2 == 1 {
			req = "POST /api/v1/events HTTP/1.1\r\nHost: apollo\r\n"
		}
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
	}
	// The flood has filled the server when it says so.
	eventually(t, 30*time.Second, "the server to notice the flood", func() bool {
		out := srv.out.String()
		return strings.Contains(out, "too many open files") || strings.Contains(out, "limits.connections")
	})

	// And it goes on: new connections that send half a header, the
	// flooder's oldest closed by itself past 2*files.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.Dial("tcp", srv.addr)
			if err != nil {
				continue
			}
			c.Write([]byte("POST /api/v1/events HTTP/1.1\r\nHost: apollo\r\n"))
			if held = append(held, c); len(held) > 2*files {
				held[0].Close()
				held = held[1:]
			}
		}
	}()
	defer func() { close(stop); <-stopped }()

	// Each tenant's reporter is answered during the flood, well within the
	// two minutes the flood's idle connections may be kept.
	client := &http.Client{Timeout: 20 * time.Second}
	for _, who := range []string{"agent-a", "agent-b"} {
		body := fmt.Sprintf(`{"taskID":"%s-1","name":"etl","sequence":1,"status":"running","ts":%d}`, who, time.Now().UnixMilli())
		req, _ := http.NewRequest("POST", "http://"+srv.addr+"/api/v1/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[who])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s's event during the flood: %v\n%s", who, err, grepLines(srv.out.String(), "connections"))
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's event during the flood: %d", who, resp.StatusCode)
		}
	}
	st, scrape := apiCall(t, srv.addr, secrets["ops"], "GET", "/metrics", "")
	if st != http.StatusOK || !strings.Contains(string(scrape), `apollo_http_connections_total{result="evicted"}`) ||
		strings.Contains(string(scrape), `apollo_http_connections_total{result="evicted"} 0`+"\n") {
		t.Errorf("the closed connections are not counted on /metrics: %d\n%s", st, grepLines(string(scrape), "apollo_http_connections"))
	}
	if out := srv.out.String(); !strings.Contains(out, "limits.connections") {
		t.Errorf("no log line names the limit:\n%s", out)
	}
}
