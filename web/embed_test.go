package web

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	index, _ := os.ReadFile("static/index.html")
	tests := []struct {
		path   string
		status int
		ctype  string
		body   []byte // nil: don't compare
	}{
		{"/", 200, "text/html; charset=utf-8", index},
		{"/overview", 200, "text/html; charset=utf-8", index},
		{"/tasks", 200, "text/html; charset=utf-8", index},
		{"/tasks/a.b%2Fc", 200, "text/html; charset=utf-8", index},
		// A deep link to a task or job whose name has ".." in it: the
		// escaped slashes are the name's, not the path's.
		{"/tasks/..%2F..%2Fnightly", 200, "text/html; charset=utf-8", index},
		{"/tasks/..%2F..%2Fapp.js", 200, "text/html; charset=utf-8", index},
		{"/jobs/..%2Freports", 200, "text/html; charset=utf-8", index},
		{"/jobs/nightly_backup", 200, "text/html; charset=utf-8", index},
		{"/alerts", 200, "text/html; charset=utf-8", index},
		{"/rules", 200, "text/html; charset=utf-8", index},
		{"/system", 200, "text/html; charset=utf-8", index},
		{"/app.js", 200, "text/javascript; charset=utf-8", nil},
		{"/vendor/preact.mjs", 200, "text/javascript; charset=utf-8", nil},
		{"/vendor/uplot.css", 200, "text/css; charset=utf-8", nil},
		{"/style.css", 200, "text/css; charset=utf-8", nil},
		{"/vendor/VERSIONS", 404, "", nil},
		{"/api/v1/metrics", 404, "", nil},
		{"/nope", 404, "", nil},
		{"/../../etc/passwd", 404, "", nil},
	}
	for _, tt := range tests {
		resp, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d", tt.path, resp.StatusCode, tt.status)
			continue
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != CSP {
			t.Errorf("%s: CSP %q", tt.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", tt.path)
		}
		if tt.status != 200 {
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tt.ctype {
			t.Errorf("%s: type %q, want %q", tt.path, got, tt.ctype)
		}
		if tt.body != nil && string(body) != string(tt.body) {
			t.Errorf("%s: not index.html", tt.path)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s: cache headers %v", tt.path, resp.Header)
			continue
		}
		req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
		req.Header.Set("If-None-Match", etag)
		again, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		again.Body.Close()
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("%s: revalidation gave %d", tt.path, again.StatusCode)
		}
	}
	resp, _ := http.Post(srv.URL+"/", "text/plain", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// TestVendoredHashes checks every file in static/vendor against VERSIONS,
// and that VERSIONS lists every file: the vendored code is what the pinned
// npm script produced.
func TestVendoredHashes(t *testing.T) {
	t.Parallel()
	f, err := os.Open("static/vendor/VERSIONS")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	pkg := regexp.MustCompile(`^(@[a-z0-9-]+/)?[a-z0-9-]+$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 5 || !pkg.MatchString(cols[1]) || !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(cols[2]) {
			t.Errorf("VERSIONS line %q: want file, package, exact version, sha256, source", line)
			continue
		}
		data, err := os.ReadFile(filepath.Join("static/vendor", cols[0]))
		if err != nil {
			t.Errorf("%s: %v", cols[0], err)
			continue
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != cols[3] {
			t.Errorf("%s: sha256 %x, VERSIONS says %s: re-run npm ci && npm run vendor", cols[0], sum, cols[3])
		}
		listed[cols[0]] = true
	}
	entries, _ := os.ReadDir("static/vendor")
	for _, e := range entries {
		if e.Name() != "VERSIONS" && !listed[e.Name()] {
			t.Errorf("%s is in static/vendor but not in VERSIONS", e.Name())
		}
	}
	if len(listed) == 0 {
		t.Error("VERSIONS lists nothing")
	}
}

// TestNoExternalReferences: nothing in the page loads from elsewhere, and
// no script is inline (the CSP would block it anyway; this finds it first).
func TestNoExternalReferences(t *testing.T) {
	t.Parallel()
	ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import\s+url\(\s*["']?https?:|<script>`)
	filepath.WalkDir("static", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(p, filepath.Join("static", "vendor")) {
			return err
		}
		data, _ := os.ReadFile(p)
		if m := ext.Find(data); m != nil {
			t.Errorf("%s: %q", p, m)
		}
		return nil
	})
}

// TestAppRoutesFromAppJS: the routes the server answers with index.html are
// exactly the pages app.js's table names, and a table that cannot be read
// is an error rather than a site that 404s every page.
func TestAppRoutesFromAppJS(t *testing.T) {
	t.Parallel()
	appJS, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	routes, err := appRoutes(appJS)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "overview", "tasks", "jobs", "alerts", "rules", "expectations", "system"}
	if len(routes) != len(want) {
		t.Errorf("routes %v, want %v", routes, want)
	}
	for _, w := range want {
		if !routes[w] {
			t.Errorf("route %q missing from %v", w, routes)
		}
	}
	for _, bad := range []string{"", "const pages = [];", "\nconst pages = [\n  [\"/tasks\", \"Tasks\", \"t\"],\n];"} {
		if r, err := appRoutes([]byte(bad)); err == nil {
			t.Errorf("appRoutes(%q) = %v, want an error", bad, r)
		}
	}
}
