package main

// The files in deploy/ and the configuration reference in
// docs/operations.md, checked against the code so that they cannot drift:
// the sample apollo.yaml loads and its channels build, the systemd units
// pass systemd-analyze, the nginx snippet carries a WebSocket and a 4 MiB
// batch to a real server, and every configuration key is documented with
// its true default.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/testwait"
)

func TestDeployConfigLoads(t *testing.T) {
	t.Parallel()
	getenv := func(name string) string { return "SECtest-" + strings.ToLower(name) }
	cfg, err := config.Load(exRepoFile(t, "deploy/apollo.yaml"), getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Data != "/var/lib/apollo" || cfg.Listen != "127.0.0.1:1969" || cfg.Alert.Heartbeat.D() != 30*time.Second {
		t.Errorf("data %q listen %q heartbeat %v", cfg.Data, cfg.Listen, cfg.Alert.Heartbeat.D())
	}
	// The channel blocks are what the notifiers accept.
	if _, err := buildDispatcher(cfg, apollo.SystemClock, slog.New(slog.DiscardHandler), io.Discard, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Channels) != 2 {
		t.Errorf("channels %v", cfg.Channels)
	}
}

func TestDeployUnitsVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found; the units in deploy/ are not checked")
	}
	units, _ := filepath.Glob(filepath.Join(filepath.Dir(exRepoFile(t, "deploy/apollo.yaml")), "*.service"))
	if len(units) < 4 {
		t.Fatalf("units: %v", units)
	}
	dir := t.TempDir()
	for _, u := range units {
		src, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "ExecStart=/usr/local/bin/apollo ") {
			t.Errorf("%s does not start /usr/local/bin/apollo", u)
		}
		// The binary is not installed here; this test binary stands in.
		text := strings.ReplaceAll(string(src), "/usr/local/bin/apollo", os.Args[0])
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", p).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", filepath.Base(u), err, out)
		}
	}
}

// Every process of deploy/'s units reloads its files on SIGHUP (the bus
// as the server: the jobs and expectations files), so every unit says
// how: without ExecReload, systemctl reload answers "Job type reload is
// not applicable" and an operator restarts instead, dropping connections.
func TestDeployUnitsReload(t *testing.T) {
	t.Parallel()
	units, _ := filepath.Glob(filepath.Join(filepath.Dir(exRepoFile(t, "deploy/apollo.yaml")), "*.service"))
	if len(units) < 4 {
		t.Fatalf("units: %v", units)
	}
	for _, u := range units {
		src, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "\nExecReload=/bin/kill -HUP $MAINPID\n") {
			t.Errorf("%s has no ExecReload that sends SIGHUP", filepath.Base(u))
		}
	}
}

// nginxConf wraps deploy/nginx.conf into a whole nginx configuration that
// proxies to upstream with a self-signed certificate, listening on two
// loopback sockets the test opens and nginx inherits (the NGINX variable
// of its binary upgrade): connections wait in their backlog until nginx
// serves them, so nothing has to poll for nginx to be up. Only addresses
// and paths in the snippet change.
func nginxConf(t *testing.T, dir, upstream string) (confFile, httpsAddr string, sockets []*os.File) {
	t.Helper()
	src, err := os.ReadFile(exRepoFile(t, "deploy/nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	cert, key := writeSelfSigned(t)
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close() // f is a duplicate that keeps the socket listening
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		sockets = append(sockets, f)
		addrs = append(addrs, ln.Addr().String())
	}
	httpsAddr, httpAddr := addrs[0], addrs[1]
	snippet := strings.NewReplacer(
		"server 127.0.0.1:1969;", "server "+upstream+";",
		"listen 443 ssl;", "listen "+httpsAddr+" ssl;",
		"listen 80;", "listen "+httpAddr+";",
		"/etc/ssl/apollo/fullchain.pem", cert,
		"/etc/ssl/apollo/privkey.pem", key,
	).Replace(string(src))
	if err := os.WriteFile(filepath.Join(dir, "apollo.conf"), []byte(snippet), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`user root;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    include %[1]s/apollo.conf;
}
`, dir)
	confFile = filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return confFile, httpsAddr, sockets
}

// The nginx snippet, with a real nginx in front of a real server: a batch
// over nginx's default body limit goes through, and the stream upgrades,
// passes the browser's Origin check and carries task changes.
func TestNginxSnippet(t *testing.T) {
	t.Parallel()
	nginx := "/usr/sbin/nginx" // Debian's, not always on root's PATH
	if _, err := os.Stat(nginx); err != nil {
		nginx = exTool(t, "nginx") // skips, or fails with APOLLO_REQUIRE_EXAMPLES=1
	}
	addr := exServer(t, "", nil)
	dir := t.TempDir()
	conf, front, sockets := nginxConf(t, dir, addr)
	if out, err := exec.Command(nginx, "-t", "-p", dir, "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", conf, "-g", "daemon off;")
	cmd.Env = append(exEnv(), "NGINX=3;4;")
	cmd.ExtraFiles = sockets
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out, err := cmd.StderrPipe(); err == nil {
		go io.Copy(io.Discard, out)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	_, port, _ := net.SplitHostPort(front)
	base := "https://localhost:" + port
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	t.Cleanup(client.CloseIdleConnections)

	// One batch of about 2 MiB: over nginx's default limit of 1 MiB.
	var b strings.Builder
	b.WriteString("[")
	pad := strings.Repeat("x", 3000)
	for i := range 700 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"taskID":"ngx-%d","name":"ngx_batch","sequence":1,"status":"running","ts":%d,"extra":{"pad":%q}}`, i, time.Now().UnixMilli(), pad)
	}
	b.WriteString("]")
	resp, err := client.Post(base+"/api/v1/events", "application/json", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"accepted":700`) {
		t.Fatalf("a %d-byte batch through nginx: HTTP %d %.300s", b.Len(), resp.StatusCode, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	conn, wresp, err := websocket.Dial(ctx, "wss://localhost:"+port+"/api/v1/stream", &websocket.DialOptions{
		HTTPClient: client, Subprotocols: []string{"apollo.v1"},
		HTTPHeader: http.Header{"Origin": {base}}, // as a browser on the dashboard sends it
	})
	if err != nil {
		t.Fatalf("stream through nginx: %v (%v)\n%s", err, wresp, exReadFile(dir, "error.log"))
	}
	defer conn.CloseNow()
	read := func(want string) map[string]any {
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("reading the stream (waiting for %s): %v", want, err)
			}
			var m map[string]any
			json.Unmarshal(data, &m)
			if m["type"] == want {
				return m
			}
		}
	}
	read("hello")
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","filter":{"prefix":"ngx_live"}}`)); err != nil {
		t.Fatal(err)
	}
	read("snapshot")
	resp, err = client.Post(base+"/api/v1/events", "application/json",
		strings.NewReader(fmt.Sprintf(`{"taskID":"ngx-live-1","name":"ngx_live","sequence":1,"status":"running","ts":%d}`, time.Now().UnixMilli())))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if m := read("tasks"); !strings.Contains(fmt.Sprint(m["tasks"]), "ngx-live-1") {
		t.Errorf("tasks message %v", m)
	}
}

func exReadFile(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}

// docConfigKeys lists every key of apollo.yaml with its default, by walking
// the yaml tags of config.Config.
func docConfigKeys(prefix string, v reflect.Value, out map[string]reflect.Value) {
	ty := v.Type()
	for i := range ty.NumField() {
		tag := strings.Split(ty.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		key := prefix + tag
		f := v.Field(i)
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(config.Duration(0)) {
			docConfigKeys(key+".", f, out)
			continue
		}
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
			out[key] = f
			docConfigKeys(key+"[].", reflect.New(f.Type().Elem()).Elem(), out)
			continue
		}
		out[key] = f
	}
}

var docRefRow = regexp.MustCompile("^\\| `([a-z0-9_.\\[\\]]+)` \\| ([^|]*) \\|")

// Every key of apollo.yaml has a row in the reference in
// docs/operations.md, and the default the row shows is the code's.
func TestOperationsConfigReference(t *testing.T) {
	t.Parallel()
	keys := map[string]reflect.Value{}
	docConfigKeys("", reflect.ValueOf(config.Default()), keys)
	f, err := os.Open(exRepoFile(t, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The rows of the reference: the tables under "## Configuration".
	documented := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Configuration"
		}
		if m := docRefRow.FindStringSubmatch(line); in && m != nil {
			documented[m[1]] = strings.TrimSpace(m[2])
		}
	}
	if len(documented) == 0 {
		t.Fatal(`docs/operations.md: no reference rows under "## Configuration"`)
	}
	for key, v := range keys {
		cell, ok := documented[key]
		if !ok {
			t.Errorf("docs/operations.md: no row for %s", key)
			continue
		}
		if err := docSameDefault(v, cell); err != nil {
			t.Errorf("docs/operations.md: %s: %v", key, err)
		}
	}
	for key := range documented {
		if _, ok := keys[key]; !ok {
			t.Errorf("docs/operations.md documents %s, which apollo.yaml does not have", key)
		}
	}
}

// docSameDefault compares a default with a reference cell: the first
// `backticked` value, or a cell with none for an empty default.
func docSameDefault(v reflect.Value, cell string) error {
	val := ""
	if i := strings.Index(cell, "`"); i >= 0 {
		if j := strings.Index(cell[i+1:], "`"); j >= 0 {
			val = cell[i+1 : i+1+j]
		}
	}
	var want string
	switch x := v.Interface().(type) {
	case config.Duration:
		if x == 0 && val == "" {
			return nil
		}
		d, err := time.ParseDuration(val)
		if err != nil || d != x.D() {
			return fmt.Errorf("the default is %v, the row says %q", x.D(), cell)
		}
		return nil
	case string:
		want = x
	case bool:
		want = strconv.FormatBool(x)
		if !x && val == "" {
			return nil
		}
	case int, int64:
		want = fmt.Sprint(x)
		if want == "0" && val == "" {
			return nil
		}
	default:
		if v.Len() == 0 && val == "" {
			return nil // lists and maps default to empty
		}
		return fmt.Errorf("a default of %v cannot be checked", x)
	}
	if val != want && !(want == "" && val == "") {
		return fmt.Errorf("the default is %q, the row says %q", want, cell)
	}
	return nil
}

// The hot backup of docs/operations.md, as printed there, taken from a
// running server whose data directory has a snapshot and records after
// it: a server started on the copy has every run of both.
func TestOperationsHotBackup(t *testing.T) {
	t.Parallel()
	var script string
	for _, b := range mdBlocks(t, "docs/operations.md", "## Backup and restore", "sh") {
		if strings.Contains(b, "DATA=/var/lib/apollo") {
			script = b
		}
	}
	if script == "" {
		t.Fatal("no backup block with DATA=/var/lib/apollo under ## Backup and restore")
	}
	cfg := testConfig(t)
	report := func(addr, id string) {
		t.Helper()
		body := fmt.Sprintf(`[{"taskID":%q,"name":"bk","sequence":1,"status":"running","ts":%d}]`, id, time.Now().UnixMilli())
		resp, err := http.Post("http://"+addr+"/api/v1/events", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("report %s: HTTP %d", id, resp.StatusCode)
		}
	}
	addr, _, stop := inProcess(t, cfg)
	report(addr, "bk-before-snapshot")
	if err := stop(); err != nil { // the final snapshot
		t.Fatal(err)
	}
	addr, _, stop = inProcess(t, cfg)
	report(addr, "bk-after-snapshot")
	if snaps, _ := filepath.Glob(filepath.Join(cfg.Data, "wal", "*.snap")); len(snaps) == 0 {
		t.Fatal("no snapshot to back up")
	}
	backup := filepath.Join(t.TempDir(), "copy")
	script = strings.NewReplacer("DATA=/var/lib/apollo", "DATA="+cfg.Data,
		"BACKUP=/backup/apollo-$(date +%Y%m%dT%H%M%S)", "BACKUP="+backup).Replace(script)
	// Under the umask of most shells (022): the copy holds every
	// tenant's runs and must not be readable by every local user, as the
	// data directory is not.
	runSnippet(t, "", "umask 022\n"+script)
	report(addr, "bk-after-backup") // not in the copy
	stop()
	filepath.WalkDir(backup, func(p string, e fs.DirEntry, err error) error {
		if fi, ierr := e.Info(); err == nil && ierr == nil && fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("the backup's %s has mode %v: every local user can read it", p, fi.Mode())
		}
		return nil
	})

	restored := testConfig(t)
	restored.Data = backup
	addr, _, _ = inProcess(t, restored)
	for _, id := range []string{"bk-before-snapshot", "bk-after-snapshot"} {
		exCheckRun(t, addr, id, "bk", apollo.StatusRunning, "running/1")
	}
	resp, err := http.Get("http://" + addr + "/api/v1/tasks/bk-after-backup")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a run reported after the backup: HTTP %d, want 404", resp.StatusCode)
	}
}
