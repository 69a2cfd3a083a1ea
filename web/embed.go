package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every answer: scripts, styles,
// fonts and connections only from the server itself; no inline script, no
// frames, no plugins. 'self' covers the stream's ws:// or wss:// URL.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// pageTable finds the app's table of pages in app.js, `const pages = [ … ];`,
// and pagePath each page's path in it: `["/tasks", "Tasks", "t"]`.
var (
	pageTable = regexp.MustCompile(`(?s)\nconst pages = \[(.*?)\n\];`)
	pagePath  = regexp.MustCompile(`\["/([a-z-]*)"`)
)

// appRoutes are the first path segments the app routes itself, all answered
// with index.html. They are read from app.js's page table, so that adding a
// page there is the only edit.
func appRoutes(appJS []byte) (map[string]bool, error) {
	m := pageTable.FindSubmatch(appJS)
	if m == nil {
		return nil, errors.New("app.js has no `const pages = [ … ];` table")
	}
	routes := map[string]bool{}
	for _, p := range pagePath.FindAllSubmatch(m[1], -1) {
		routes[string(p[1])] = true
	}
	if !routes[""] {
		return nil, errors.New(`app.js's page table has no "/" page`)
	}
	return routes, nil
}

// served are the file types Handler serves; anything else in static (the
// VERSIONS list) is not part of the site.
var served = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

type file struct {
	body  []byte
	etag  string
	ctype string
}

// Handler serves the dashboard. Files are revalidated on each load
// (Cache-Control: no-cache) against a strong ETag, so an upgraded binary is
// picked up at once and an unchanged file costs a 304.
func Handler() http.Handler {
	files := map[string]*file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := served[path.Ext(p)]
		if !ok {
			return nil
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files[strings.TrimPrefix(p, "static")] = &file{body: body, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, ctype: ctype}
		return nil
	})
	if err != nil { // the embedded tree is part of the binary: this is a build bug
		panic("web: reading the embedded files: " + err.Error())
	}
	index := files["/index.html"]
	routes, err := appRoutes(files["/app.js"].body)
	if err != nil { // as above: app.js is part of the binary
		panic("web: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// The escaped path: a task ID or job name in a deep link may hold
		// "../" (escaped as ..%2F), which is part of the name, not a step
		// up; cleaning the unescaped path took /tasks/..%2Fx for /x (404).
		p := path.Clean("/" + r.URL.EscapedPath())
		f := files[p]
		if f == nil {
			first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
			if !routes[first] {
				http.NotFound(w, r)
				return
			}
			f = index
		}
		h.Set("Content-Type", f.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
