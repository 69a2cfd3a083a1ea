package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
)

// requestBody is request with a JSON body.
func requestBody(t *testing.T, addr, secret, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// A correction made through one node is in GET /api/v1/audit of every
// node, at once, of its tenant's only, and it outlives the node that
// wrote it (kill -9) and comes back to it when it restarts. Before, each
// node kept its audit log in its own memory: the other node never showed
// the entry, and the kill lost it, the one API write that did not
// survive a restart.
func TestBusNodeAuditIsSharedAndSurvivesKill(t *testing.T) {
	t.Parallel()
	start, tokens := busNodesWithTenants(t, startNATS(t).ClientURL(), 2)
	a, b := start("audit-a"), start("audit-b")
	eventually(t, testwait.Timeout(t), "a partition served by each node", func() bool {
		served := func(addr string) int {
			_, body := request(t, addr, tokens[""], "GET", "/api/v1/system")
			return strings.Count(body, `"partition":`)
		}
		return served(a.addr) == 1 && served(b.addr) == 1
	})
	now := time.Now().UnixMilli()
	for _, tenant := range tenants {
		id := "fix-" + tenant
		ev := fmt.Sprintf(`{"taskID":%q,"sequence":1,"status":"running","ts":%d}`, id, now)
		if ans := postAs(t, a.addr, tokens[tenant], ev); !strings.Contains(ans, `"accepted":1`) {
			t.Fatalf("tenant %s: %s", tenant, ans)
		}
		code, body := requestBody(t, a.addr, tokens[tenant], "POST", "/api/v1/tasks/"+id+"/status",
			`{"status":"failed","reason":"reason of `+tenant+`"}`)
		if code != http.StatusOK {
			t.Fatalf("tenant %s: correction %d %s", tenant, code, body)
		}
	}
	// shows checks each tenant's audit through addr: its own correction,
	// not the other tenant's.
	shows := func(when, addr string) {
		t.Helper()
		for i, tenant := range tenants {
			code, body := request(t, addr, tokens[tenant], "GET", "/api/v1/audit")
			if code != http.StatusOK {
				t.Fatalf("%s, tenant %s: GET audit %d %s", when, tenant, code, body)
			}
			if !strings.Contains(body, `reason of `+tenant+`"`) || !strings.Contains(body, `"target":"fix-`+tenant+`"`) {
				t.Errorf("%s, tenant %s: the correction is missing from the audit: %s", when, tenant, body)
			}
			if other := tenants[1-i]; strings.Contains(body, other) {
				t.Errorf("%s, tenant %s: the audit shows tenant %s's entry: %s", when, tenant, other, body)
			}
		}
	}
	shows("through the writer", a.addr)
	shows("through the other node, at once", b.addr)
	a.kill()
	shows("through the other node after kill -9 of the writer", b.addr)
	a = start("audit-a")
	eventually(t, testwait.Timeout(t), "the restarted node answering", func() bool {
		code, _ := request(t, a.addr, tokens[""], "GET", "/api/v1/audit")
		return code == http.StatusOK
	})
	shows("through the writer restarted", a.addr)
}
