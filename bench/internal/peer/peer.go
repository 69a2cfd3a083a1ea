// Package peer gets the binaries of the programs the bench runs beside
// Apollo-11 (Prometheus Pushgateway, Alertmanager): one the operator names,
// or one built from the peer's released module, fetched with the go
// command through the Go module proxy ($GOPROXY) like any dependency and
// kept in the user's cache directory, so only the first run pays for the
// build. No peer code is kept in this repository. When neither way works
// the caller gets an error that says why, to print in place of the peer's
// figures.
package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Spec says where a peer's source is and how its main package builds.
type Spec struct {
	Name    string // binary name, e.g. "alertmanager"
	Title   string // for people, e.g. "Prometheus Alertmanager"
	Module  string // e.g. "github.com/prometheus/alertmanager"
	Version string // a released version, e.g. "v0.35.0"
	Main    string // the main package, relative to the module root
	Env     string // variable that may name a binary to use instead, e.g. "APOLLO_ALERTMANAGER"
	// VersionVar, if set, is the package variable (for -ldflags -X) that
	// the binary's --version prints, so the report names what ran.
	VersionVar string
	// Prepare, if set, adjusts the unpacked module before the build (the
	// module as published may lack generated files its build embeds).
	Prepare func(root string) error
}

// Binary is a peer ready to run.
type Binary struct {
	Path    string
	From    string // how it was obtained, for the report
	Version string // the first line of its --version
}

// Get returns the binary named by given (a flag) or by $Env, else the
// cached build of s, else, if build is true, builds it. The error says
// plainly why there is no binary.
func Get(ctx context.Context, s Spec, given string, build bool) (Binary, error) {
	if given == "" {
		given = os.Getenv(s.Env)
	}
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return Binary{}, fmt.Errorf("%s: the binary named by -%s / $%s: %w", s.Title, s.Name, s.Env, err)
		}
		return Binary{Path: given, From: "the binary given (" + given + ")", Version: version(ctx, given)}, nil
	}
	dir, err := cacheDir(s)
	if err != nil {
		return Binary{}, err
	}
	bin := filepath.Join(dir, s.Name)
	from := fmt.Sprintf("built by this command from the module %s@%s (go mod download, then go build %s), cached in %s", s.Module, s.Version, s.Main, dir)
	if _, err := os.Stat(bin); err == nil {
		return Binary{Path: bin, From: from, Version: version(ctx, bin)}, nil
	}
	if !build {
		return Binary{}, fmt.Errorf("%s: not built in -short (no cached build in %s; a run without -short builds it once, or name a binary with -%s or $%s)", s.Title, dir, s.Name, s.Env)
	}
	if err := buildModule(ctx, s, bin); err != nil {
		return Binary{}, fmt.Errorf("%s could not be built: %w", s.Title, err)
	}
	return Binary{Path: bin, From: from, Version: version(ctx, bin)}, nil
}

// cacheDir is where s's build is kept: $XDG_CACHE_HOME (or ~/.cache)
// /apollo-bench/peers/NAME-VERSION.
func cacheDir(s Spec) (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%s: no cache directory for the build: %w", s.Title, err)
	}
	return filepath.Join(c, "apollo-bench", "peers", s.Name+"-"+s.Version), nil
}

// buildModule downloads s's module, copies it out of the read-only module
// cache, prepares it and builds its main package into bin (through a
// temporary name, so an interrupted build is never taken for a finished
// one).
func buildModule(ctx context.Context, s Spec, bin string) error {
	tmp, err := os.MkdirTemp("", "apollo-bench-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Outside any module, with the toolchain at hand: a failure is
	// reported as it is instead of fetching another Go.
	env := append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod -buildvcs=false")
	out, err := goCmd(ctx, tmp, env, "mod", "download", "-json", s.Module+"@"+s.Version)
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr != nil || mod.Error != "" || err != nil {
		return fmt.Errorf("go mod download %s@%s: %s", s.Module, s.Version, firstNonEmpty(mod.Error, strings.TrimSpace(string(out)), fmt.Sprint(err)))
	}
	src := filepath.Join(tmp, "src")
	if err := copyTree(mod.Dir, src); err != nil {
		return err
	}
	if s.Prepare != nil {
		if err := s.Prepare(src); err != nil {
			return fmt.Errorf("preparing the source: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-o", bin + ".part"}
	if s.VersionVar != "" {
		args = append(args, "-ldflags", "-X "+s.VersionVar+"="+strings.TrimPrefix(s.Version, "v"))
	}
	if out, err := goCmd(ctx, src, env, append(args, s.Main)...); err != nil {
		return fmt.Errorf("go build %s of %s@%s: %v\n%s", s.Main, s.Module, s.Version, err, tail(out, 20))
	}
	return os.Rename(bin+".part", bin)
}

func goCmd(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// copyTree copies the regular files under from to to, writable.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// version is the first line of bin --version ("" if it has none).
func version(ctx context.Context, bin string) string {
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Placeholder writes file (a path relative to the module root) with a
// line saying the bench put it there: for a generated asset that a
// published module lacks but its build embeds.
func Placeholder(file string) func(root string) error {
	return func(root string) error {
		p := filepath.Join(root, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if _, err := os.Stat(p); err == nil {
			return nil // the module has the real one
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return os.WriteFile(p, []byte("<!-- placeholder written by Apollo-11's bench: the web UI is not built -->\n"), 0o644)
	}
}

// versionVar is where Prometheus programs keep the version --version prints.
const versionVar = "github.com/prometheus/common/version.Version"

// Pushgateway is Prometheus Pushgateway, where batch jobs push their
// metrics for Prometheus to scrape.
var Pushgateway = Spec{
	Name: "pushgateway", Title: "Prometheus Pushgateway", Module: "github.com/prometheus/pushgateway",
	Version: "v1.11.3", Main: ".", Env: "APOLLO_PUSHGATEWAY", VersionVar: versionVar,
}

// Alertmanager is Prometheus Alertmanager. Its web UI is built by npm and
// is not in the published module, yet its main package embeds it: a
// placeholder page stands in (the bench uses only the API).
var Alertmanager = Spec{
	Name: "alertmanager", Title: "Prometheus Alertmanager", Module: "github.com/prometheus/alertmanager",
	Version: "v0.35.0", Main: "./cmd/alertmanager", Env: "APOLLO_ALERTMANAGER", VersionVar: versionVar,
	Prepare: Placeholder("ui/app/dist/index.html"),
}
