package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// gateway is a Pushgateway holding n groups, ready to be measured.
type gateway struct {
	p           *harness.Proc
	dir         string
	client      *http.Client
	rssPerGroup float64 // bytes
	next        int64   // results pushed so far, for the next job and values
}

// startGateway fills a Pushgateway with n groups and restarts it with its
// defaults on what it persisted. Filling goes with the consistency check
// off: with it on, every push gathers every group already there, so n
// pushes cost O(n²) (days at 100 k). The check is part of every push
// measured afterwards, as it is by default.
func startGateway(bin string, n int) (*gateway, error) {
	dir, err := os.MkdirTemp("", "apollo-bench-pushgateway-")
	if err != nil {
		return nil, err
	}
	g := &gateway{dir: dir, client: &http.Client{Timeout: 10 * time.Minute}}
	file := filepath.Join(dir, "pushgateway.db")
	fill, err := startPG(bin, dir, "--persistence.file="+file, "--push.disable-consistency-check")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	empty, err := harness.Sample(fill.PID())
	if err == nil {
		err = g.fill(fill.Addr, n)
	}
	// A clean stop writes the persistence file.
	if serr := fill.Stop(5 * time.Minute); err == nil && serr != nil {
		err = fmt.Errorf("stopping the filled Pushgateway (it persists on a clean stop): %w\n%s", serr, fill.Log())
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// No periodic persisting while measured: the file is only how the
	// groups got in.
	if g.p, err = startPG(bin, dir, "--persistence.file="+file, "--persistence.interval=24h"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	full, err := harness.Sample(g.p.PID())
	if err == nil {
		g.rssPerGroup = float64(full.RSS-empty.RSS) / float64(n)
		err = g.count(n)
	}
	if err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// startPG runs Pushgateway on a free loopback port.
func startPG(bin, dir string, args ...string) (*harness.Proc, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	args = append([]string{"--web.listen-address=" + addr, "--log.level=warn"}, args...)
	return harness.Start(bin, harness.Options{Args: args, Dir: dir, Addr: addr, ReadyURL: "/-/ready", Wait: 5 * time.Minute})
}

func (g *gateway) stop() {
	g.p.Stop(time.Minute)
	os.RemoveAll(g.dir)
}

// fill pushes every job's first result, four pushes at a time.
func (g *gateway) fill(addr string, n int) error {
	var mu sync.Mutex
	var first error
	harness.ForEach(n, 4, func(i int) {
		if err := push(g.client, addr, i, int64(i)); err != nil {
			mu.Lock()
			first = cmp.Or(first, err)
			mu.Unlock()
		}
	})
	return first
}

// count checks that the restarted Pushgateway serves all n groups.
func (g *gateway) count(n int) error {
	resp, err := g.client.Get("http://" + g.p.Addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "batch_job_duration_seconds{") {
			got++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%d groups pushed before the restart, %d served after it", n, got)
	}
	return nil
}

// measure pushes one result at a time to the n jobs in turn.
func (g *gateway) measure(n int, o opts) (window, error) {
	return load(g.p.PID(), o, func(int64) (int, error) {
		r := g.next
		g.next++
		return 1, push(g.client, g.p.Addr, int(r%int64(n)), r)
	})
}

// push is what a batch job sends when it ends: its metrics, replacing its
// group (PUT). Run r's values differ from run to run.
func push(c *http.Client, addr string, job int, r int64) error {
	var b bytes.Buffer
	now := float64(time.Now().UnixMilli()) / 1e3
	fmt.Fprintf(&b, "# TYPE batch_job_last_completion_timestamp_seconds gauge\nbatch_job_last_completion_timestamp_seconds %.3f\n", now)
	fmt.Fprintf(&b, "# TYPE batch_job_duration_seconds gauge\nbatch_job_duration_seconds %.3f\n", 1+float64(r%600)/10)
	fmt.Fprintf(&b, "# TYPE batch_job_succeeded gauge\nbatch_job_succeeded 1\n")
	req, err := http.NewRequest(http.MethodPut, "http://"+addr+"/metrics/job/"+jobName(job), &b)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain; version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	// 200 once checked; 202 when the check is off (queued, not checked).
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("PUT /metrics/job/%s: %s %s", jobName(job), resp.Status, body)
	}
	return nil
}

// jobName is job i's name on both sides (as harness.AppendEvent names it).
func jobName(i int) string { return "load_job_" + strconv.Itoa(i) }
