package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// groupWindow is the Apollo-11 rule's GROUP_WINDOW: the follow-up that
// counts the rest of the storm comes at its end, so 1s is the setting to
// set beside Alertmanager's group_wait of 1s.
const groupWindow = "1s"

// apolloStorm is what one storm on Apollo-11 took.
type apolloStorm struct {
	first time.Duration // sending the failures → the first notification
	told  int           // the failures the first notification counts
	post  time.Duration // → the POST answered
	all   time.Duration // → the notification after which every failure has been counted
}

// stormApollo starts a fresh apollo server with one event rule and a
// webhook channel to the sink, starts n runs of n jobs, then posts their
// n failures in one request.
func stormApollo(bin string, sink *harness.Sink, n int) (apolloStorm, error) {
	var s apolloStorm
	dir, err := os.MkdirTemp("", "apollo-bench-storm-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	rulesFile := filepath.Join(dir, "storm.rules")
	rule := fmt.Sprintf("RULE batch_failed task_prefix: \"load_job_\" ON: failed GROUP_WINDOW: %s NOTIFY: hook\n", groupWindow)
	if err := os.WriteFile(rulesFile, []byte(rule), 0o644); err != nil {
		return s, err
	}
	cfg := fmt.Sprintf("rules: %s\nlimits:\n  ingest_per_second: 0\nchannels:\n  hook:\n    type: webhook\n    url: %s/apollo\n", rulesFile, sink.URL)
	cfgFile := filepath.Join(dir, "check.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return s, err
	}
	if out, err := exec.Command(bin, "rules", "check", "--config", cfgFile, rulesFile).CombinedOutput(); err != nil {
		return s, fmt.Errorf("apollo rules check: %v\n%s", err, out)
	}
	p, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: cfg, Dir: dir})
	if err != nil {
		return s, err
	}
	defer p.Stop(30 * time.Second)
	c := harness.NewClient(1)
	defer c.CloseIdleConnections()
	var ans bytes.Buffer
	post := func(seq int64, status string) error {
		var b []byte
		b = append(b, '[')
		ts := time.Now().UnixMilli()
		for i := range int64(n) {
			if i > 0 {
				b = append(b, ',')
			}
			b = harness.AppendEvent(b, "run-", i, n, seq, status, ts)
		}
		b = append(b, ']')
		code, acc, err := harness.Post(c, p.URL(), b, &ans)
		if err == nil && (code != http.StatusOK || acc != n) {
			err = fmt.Errorf("POST %d %s events: %d, %d accepted: %.300s", n, status, code, acc, ans.Bytes())
		}
		return err
	}
	if err := post(1, "running"); err != nil {
		return s, err
	}
	sink.Reset()
	t0 := time.Now()
	if err := post(2, "failed"); err != nil {
		return s, err
	}
	s.post = time.Since(t0)
	counted := 0
	m, ok := sink.Wait(time.Minute, func(m harness.Message) bool {
		var note struct{ Alert struct{ Count int } }
		if m.Path != "/apollo" || json.Unmarshal(m.Body, &note) != nil {
			return false
		}
		if s.first == 0 {
			s.first, s.told = m.At.Sub(t0), note.Alert.Count
		}
		counted += note.Alert.Count
		return counted >= n
	})
	if !ok {
		return s, fmt.Errorf("%d of %d failures told at the webhook within a minute (first after %v)\n%s", counted, n, s.first, p.Log())
	}
	s.all = m.At.Sub(t0)
	return s, nil
}
