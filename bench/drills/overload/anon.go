package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/httpapi"
)

// The anonymous flood (issue 16.3): callers with a wrong token send
// requests with 60 KB paths, as fast as they can. Every one must be
// answered 401 without costing memory or disk that grows with them, and
// the tenants' audit entries must survive it.
const (
	floodSenders  = 4
	floodPathSize = 60 << 10
	// Bounds: the audit files may hold a few aggregated entries a minute,
	// not the flood; the server's memory may not grow with it.
	floodAuditLimit = 1 << 20
	floodRSSGrowth  = 64 << 20
)

// anonFlood runs the flood for d against a fresh server with an admin
// token in tenants a and b and in the default tenant, and prints its
// section.
func anonFlood(bin string, d time.Duration) error {
	tokens := map[string]string{}
	cfg := "auth:\n  tokens:\n"
	for _, tenant := range []string{"a", "b", ""} {
		secret, tok, err := httpapi.NewToken("admin-"+tenant, httpapi.RoleAdmin, tenant)
		if err != nil {
			return err
		}
		tokens[tenant] = secret
		cfg += fmt.Sprintf("    - {name: admin-%s, role: admin, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	srv, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: cfg})
	if err != nil {
		return err
	}
	defer func() { srv.Kill(); srv.Remove() }()
	call := func(method, path, token, body string) (int, []byte, error) {
		req, err := http.NewRequest(method, srv.URL()+path, strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	// Each tenant's admin makes one audited change before the flood.
	for _, tenant := range []string{"a", "b"} {
		id := "flood-victim-" + tenant
		ev := fmt.Sprintf(`{"taskID":%q,"sequence":1,"status":"running","ts":%d}`, id, time.Now().UnixMilli())
		if code, b, err := call("POST", "/api/v1/events", tokens[tenant], ev); err != nil || code != 200 {
			return fail("seeding tenant %s: %d %s %v", tenant, code, b, err)
		}
		if code, b, err := call("POST", "/api/v1/tasks/"+id+"/status", tokens[tenant], `{"status":"failed","reason":"before the flood"}`); err != nil || code != 200 {
			return fail("correcting in tenant %s: %d %s %v", tenant, code, b, err)
		}
	}
	before, err := harness.Sample(srv.PID())
	if err != nil {
		return err
	}
	peak, stopSampling := sampleRSS(srv, false)

	path := "/api/v1/tasks/" + strings.Repeat("x", floodPathSize)
	var requests, other atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for g := range floodSenders {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest("GET", srv.URL()+path, nil)
				req.Header.Set("Authorization", fmt.Sprintf("Bearer apl_wrong%d", g))
				resp, err := client.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				requests.Add(1)
				if resp.StatusCode != http.StatusUnauthorized {
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stopSampling()
	duringFlood := auditBytes(srv.Dir)

	// Each tenant sees its entry; the default tenant sees the flood, counted.
	lists := map[string][]audit.Entry{}
	for tenant, tok := range tokens {
		code, b, err := call("GET", "/api/v1/audit?limit=1000", tok, "")
		var out struct{ Entries []audit.Entry }
		if err == nil {
			err = json.NewDecoder(bytes.NewReader(b)).Decode(&out)
		}
		if err != nil || code != 200 {
			return fail("GET /api/v1/audit as tenant %q: %d %v", tenant, code, err)
		}
		lists[tenant] = out.Entries
	}
	counted := 0
	for _, e := range lists[""] {
		if e.Action == "auth.fail" {
			counted += max(e.Count, 1)
		}
	}
	// A clean stop writes the interval still open: the file then holds
	// everything the flood left.
	if err := srv.Stop(30 * time.Second); err != nil {
		return fail("stopping the server: %v", err)
	}
	after := auditBytes(srv.Dir)

	n := requests.Load()
	fmt.Println()
	fmt.Println("### Callers without a valid token")
	fmt.Println()
	fmt.Printf("A fresh server with an admin token in tenants a and b and in the default tenant; each tenant's admin corrects a run "+
		"(an audited change). Then %d senders request `GET /api/v1/tasks/<%d KB path>` with a wrong bearer token, one request at a time each, "+
		"for %v. The audit files (`DATA/audit/`) are measured at the end of the flood and after a clean stop (which writes the failures "+
		"of the interval still open), RSS every second; then each admin reads `GET /api/v1/audit`.\n\n", floodSenders, floodPathSize>>10, d)
	fmt.Println("| figure | value |\n|---|---|")
	fmt.Printf("| requests / answered other than 401 | %d (%.0f/s) / %d |\n", n, float64(n)/d.Seconds(), other.Load())
	fmt.Printf("| audit files: at the end of the flood / after the stop | %d B / %d B |\n", duringFlood, after)
	fmt.Printf("| RSS: before / peak during the flood | %s / %s |\n", harness.MiB(before.RSS), harness.MiB(peak.Load()))
	fmt.Printf("| failures counted in the default tenant's audit list | %d in %d entries |\n", counted, len(lists[""]))
	fmt.Printf("| tenant a / b entries listed after the flood | %d / %d |\n", len(lists["a"]), len(lists["b"]))
	fmt.Println()
	fmt.Printf("Target: callers with no token cannot fill the disk, grow memory or push out the tenants' audit entries — ")
	growth := peak.Load() - before.RSS
	switch {
	case other.Load() != 0:
		fmt.Printf("MISSED (%d requests not answered 401)\n", other.Load())
		return fail("%d flood requests were not answered 401", other.Load())
	case after > floodAuditLimit:
		fmt.Printf("MISSED (audit files %d B)\n", after)
		return fail("the audit files hold %d bytes after the flood (bound %d)", after, floodAuditLimit)
	case growth > floodRSSGrowth:
		fmt.Printf("MISSED (RSS +%s)\n", harness.MiB(growth))
		return fail("RSS grew by %s under the flood (bound %s)", harness.MiB(growth), harness.MiB(floodRSSGrowth))
	case len(lists["a"]) != 1 || len(lists["b"]) != 1:
		fmt.Printf("MISSED (tenants list %d and %d entries)\n", len(lists["a"]), len(lists["b"]))
		return fail("after the flood tenant a lists %d entries and b %d, want 1 each", len(lists["a"]), len(lists["b"]))
	case int64(counted) != n:
		fmt.Printf("MISSED (%d failures counted of %d)\n", counted, n)
		return fail("the audit list counts %d failures, %d were made", counted, n)
	}
	fmt.Printf("met (%d requests; audit files %d B; RSS +%s)\n", n, after, harness.MiB(max(growth, 0)))
	return nil
}

// auditBytes is the size of the audit files in a server's data directory.
func auditBytes(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(filepath.Join(dir, "data", "audit"))
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}
