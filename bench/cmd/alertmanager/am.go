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
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// amConfig routes every alert, grouped by alertname (so the storm is one
// group, as Apollo-11's rule makes it), to the sink. groupWait "" leaves
// Alertmanager's default.
func amConfig(sinkURL, groupWait string) string {
	var b strings.Builder
	b.WriteString("route:\n  receiver: sink\n  group_by: [alertname]\n")
	if groupWait != "" {
		fmt.Fprintf(&b, "  group_wait: %s\n", groupWait)
	}
	fmt.Fprintf(&b, "receivers:\n  - name: sink\n    webhook_configs:\n      - url: %s/alertmanager\n        send_resolved: false\n", sinkURL)
	return b.String()
}

// stormAM starts a fresh Alertmanager with groupWait, posts n alerts in one
// request to /api/v2/alerts and returns the time from sending them to the
// first notification at the sink, and how many alerts it carried.
func stormAM(bin string, sink *harness.Sink, groupWait string, n int) (time.Duration, int, error) {
	dir, err := os.MkdirTemp("", "apollo-bench-alertmanager-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(amConfig(sink.URL, groupWait)), 0o644); err != nil {
		return 0, 0, err
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		return 0, 0, err
	}
	// --cluster.listen-address= turns clustering off: one instance, and
	// nothing listening beyond the loopback address given.
	p, err := harness.Start(bin, harness.Options{Args: []string{"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--cluster.listen-address=", "--log.level=warn"}, Dir: dir, Addr: addr, ReadyURL: "/-/ready"})
	if err != nil {
		return 0, 0, err
	}
	defer p.Stop(time.Minute)
	body, err := alertsBody(n)
	if err != nil {
		return 0, 0, err
	}
	sink.Reset()
	t0 := time.Now()
	resp, err := http.Post("http://"+addr+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	ans, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("POST /api/v2/alerts: %s %s", resp.Status, ans)
	}
	var got int
	m, ok := sink.Wait(2*time.Minute, func(m harness.Message) bool {
		var p struct{ Alerts []json.RawMessage }
		if m.Path != "/alertmanager" || json.Unmarshal(m.Body, &p) != nil {
			return false
		}
		got = len(p.Alerts)
		return true
	})
	if !ok {
		return 0, 0, fmt.Errorf("no notification at the webhook within 2 minutes\n%s", p.Log())
	}
	return m.At.Sub(t0), got, nil
}

// alertsBody is n firing alerts, one per failed job, as a monitoring
// system posts them.
func alertsBody(n int) ([]byte, error) {
	type alert struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
	}
	now := time.Now().UTC()
	as := make([]alert, n)
	for i := range as {
		job := jobName(i)
		as[i] = alert{
			Labels:      map[string]string{"alertname": "BatchJobFailed", "job": job, "severity": "warning"},
			Annotations: map[string]string{"summary": job + " failed"},
			StartsAt:    now,
		}
	}
	return json.Marshal(as)
}
