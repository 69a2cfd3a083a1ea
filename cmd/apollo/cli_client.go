package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo"
)

// Exit codes of the commands that talk to a server (docs/cli.md).
const (
	exitOK       = 0
	exitServer   = 1 // the server failed or could not be reached
	exitUsage    = 2 // bad flags or arguments, or input the server rejected
	exitNotFound = 3
	exitDenied   = 4 // unauthorized or forbidden
)

// exitFor maps an HTTP status to the exit code of a command.
func exitFor(status int) int {
	switch status {
	case http.StatusNotFound:
		return exitNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return exitDenied
	case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return exitUsage
	}
	return exitServer
}

// usageError is a mistake in the command line: exit 2.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// cliConfig is ~/.config/apollo/cli.yaml: where the CLI finds its server
// when neither a flag nor the environment says.
type cliConfig struct {
	Server string `yaml:"server"`
	Token  string `yaml:"token"`
}

// cliConfigPath is $XDG_CONFIG_HOME/apollo/cli.yaml, else
// ~/.config/apollo/cli.yaml (the same place on every system, as the
// documentation says, rather than os.UserConfigDir's per-system one).
func cliConfigPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "apollo", "cli.yaml")
}

func readCLIConfig(path string) (cliConfig, error) {
	var c cliConfig
	if path == "" {
		return c, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, usageError("%s: %v (write server: URL and token: SECRET)", path, err)
	}
	return c, nil
}

// resolveCLI fills the server and token: flags, then APOLLO_SERVER and
// APOLLO_TOKEN, then cli.yaml, then the default address. The file's token
// is used only with the file's server (or when the file names none), so
// that --server elsewhere never carries it to another host.
func (c *clientFlags) resolveCLI() error {
	if c.server == "" {
		c.server = os.Getenv("APOLLO_SERVER")
	}
	if c.token == "" {
		c.token = os.Getenv("APOLLO_TOKEN")
	}
	if c.server == "" || c.token == "" {
		f, err := readCLIConfig(cliConfigPath())
		if err != nil {
			return err
		}
		if c.server == "" {
			c.server = f.Server
		}
		if c.token == "" && (f.Server == "" || sameServer(f.Server, c.server)) {
			c.token = f.Token
		}
	}
	c.resolve()
	return nil
}

func sameServer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// apiClient is the CLI's small HTTP client for one server.
type apiClient struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string
	http  *http.Client
}

// requestTimeout bounds one request; the API answers reads at once.
const requestTimeout = 30 * time.Second

func newAPIClient(cf *clientFlags) (*apiClient, error) {
	if err := cf.resolveCLI(); err != nil {
		return nil, err
	}
	u, err := url.Parse(cf.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("--server %q: want a URL like http://127.0.0.1:1969", cf.server)
	}
	return &apiClient{base: strings.TrimSuffix(cf.server, "/"), token: cf.token, http: &http.Client{Timeout: requestTimeout}}, nil
}

// apiError is an error answer of the server.
type apiError struct {
	status int
	err    *apollo.Error
	body   []byte // the whole answer, for commands that read more of it
}

func (e *apiError) Error() string { return e.err.Error() }

// errNoRoute matches (errors.Is) the error for a route the server does
// not have: an older server, or some other program on that port.
var errNoRoute = errors.New("route not served")

type noRouteError struct{ msg string }

func (e *noRouteError) Error() string        { return e.msg }
func (e *noRouteError) Is(target error) bool { return target == errNoRoute }

// call sends a request and returns the answer's body. body may be nil.
// A non-2xx answer is an *exitError with the exit code for its status,
// wrapping an *apiError; a failure to connect is one with exit code 1.
func (c *apiClient) call(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) ([]byte, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, usageError("%s %s: %v", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &exitError{code: exitServer, err: fmt.Errorf("cannot reach %s: %w (is the server running? check --server or APOLLO_SERVER)", c.base, err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &exitError{code: exitServer, err: fmt.Errorf("%s %s: reading the answer: %w", method, path, err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return raw, nil
	}
	return nil, c.answerError(method, path, resp, raw)
}

// answerError turns an error answer into the error a command returns.
func (c *apiClient) answerError(method, path string, resp *http.Response, raw []byte) error {
	var eb struct {
		Error *apollo.Error `json:"error"`
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" && json.Unmarshal(raw, &eb) == nil && eb.Error != nil {
		if eb.Error.Message == "" {
			eb.Error.Message = fmt.Sprintf("%s %s: %s", method, path, resp.Status)
		}
		return &exitError{code: exitFor(resp.StatusCode), err: &apiError{status: resp.StatusCode, err: eb.Error, body: raw}}
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		// Our API answers every error in JSON: a plain one means the
		// route is not there at all.
		return &exitError{code: exitServer, err: &noRouteError{fmt.Sprintf("the server at %s does not serve %s %s: it may be an older version of Apollo-11, or another program", c.base, method, path)}}
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	return &exitError{code: exitFor(resp.StatusCode), err: &apiError{status: resp.StatusCode, body: raw,
		err: &apollo.Error{Code: apollo.EINTERNAL, Message: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, text)}}}
}

// get fetches path and decodes the JSON answer into out (when not nil).
func (c *apiClient) get(ctx context.Context, path string, q url.Values, out any) ([]byte, error) {
	raw, err := c.call(ctx, http.MethodGet, path, q, nil, "")
	if err != nil {
		return nil, err
	}
	return raw, decodeAnswer(path, raw, out)
}

// send posts (or puts, deletes) v as JSON and decodes the answer into out.
func (c *apiClient) send(ctx context.Context, method, path string, v, out any) ([]byte, error) {
	var body io.Reader
	ct := ""
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	raw, err := c.call(ctx, method, path, nil, body, ct)
	if err != nil {
		return nil, err
	}
	return raw, decodeAnswer(path, raw, out)
}

func decodeAnswer(path string, raw []byte, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &exitError{code: exitServer, err: fmt.Errorf("%s: the answer is not what this CLI understands: %w (is the server the same version?)", path, err)}
	}
	return nil
}

// pathEscape escapes one path segment (a task ID may hold '/', '#', '?').
func pathEscape(s string) string { return url.PathEscape(s) }
