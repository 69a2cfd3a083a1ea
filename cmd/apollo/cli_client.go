package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// Exit codes of the commands that talk to a server (docs/cli.md).
const (
	exitOK       = 0
	exitServer   = 1 // the server failed or could not be reached
	exitUsage    = 2 // bad flags or arguments, or input the server rejected
	exitNotFound = 3
	exitDenied   = 4 // unauthorized or forbidden
)

// exitFor is the exit code of a command the server answered with an
// error of this code.
func exitFor(code string) int {
	switch code {
	case apollo.ENOTFOUND:
		return exitNotFound
	case apollo.EUNAUTHORIZED, apollo.EFORBIDDEN:
		return exitDenied
	case apollo.EINVALID, apollo.ECONFLICT, apollo.ETOOLARGE, apollo.EUNSUPPORTED:
		return exitUsage
	}
	return exitServer
}

// unreachableHint says what to do about a server the CLI could not reach:
// trust its certificate when that is what failed, else check the address.
func unreachableHint(err error) string {
	var ve *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case errors.As(err, &he):
		return "the server's certificate is for another name: use that name in --server or APOLLO_SERVER"
	case errors.As(err, &ue), errors.As(err, &ve):
		return "the server's certificate is not trusted here: give its CA with SSL_CERT_FILE=/path/to/ca.pem"
	}
	return "is the server running? check --server or APOLLO_SERVER"
}

// cliFailure gives an error of the API client its exit code: 1 for a
// server that did not answer, or that lacks the route; else by the
// answer's error code.
func cliFailure(err error) error {
	var (
		ee *exitError
		ue *apiclient.UnreachableError
		ae *apiclient.Error
	)
	switch {
	case errors.As(err, &ee):
		return err
	case errors.As(err, &ue):
		return &exitError{code: exitServer, err: fmt.Errorf("%w (%s)", err, unreachableHint(err))}
	case errors.Is(err, apiclient.ErrNoRoute):
		return &exitError{code: exitServer, err: err}
	case errors.As(err, &ae):
		ae.Err.Hint = cliHints.Replace(ae.Err.Hint)
		return &exitError{code: exitFor(ae.Err.Code), err: err}
	}
	return err
}

// cliHints turn the routes the server's hints name (it speaks to every
// client) into the commands that do the same here.
var cliHints = strings.NewReplacer(
	"with GET /api/v1/alerts", "with apollo alerts",
	"with GET /api/v1/jobs", "with apollo job list",
	"with GET /api/v1/silences", "with apollo silence list",
	"one job's series at /api/v1/metrics/{name}", "one job's series (apollo job NAME)",
	"send Authorization: Bearer <token>; `apollo token create` makes one",
	"give the token with --token, APOLLO_TOKEN or token: in cli.yaml; apollo token create makes one",
)

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
	b, err := sourcefile.Read(path, "CLI configuration file", sourcefile.MaxSize)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	return parseCLIConfig(path, b)
}

// parseCLIConfig reads cli.yaml's text; path names it in messages.
func parseCLIConfig(path string, b []byte) (cliConfig, error) {
	var c cliConfig
	const want = "write server: URL and token: SECRET"
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		if bad := sourcefile.BadChar(b, "a CLI configuration file"); bad != nil && sourcefile.Refused(err.Error()) {
			return c, usageError("%s:%d:%d: %s (%s) (%s)", path, bad.Line, bad.Col, bad.Message, bad.Hint, want)
		}
		return c, usageError("%s: %v (%s)", path, err, want)
	}
	// An unknown key is an error, as in apollo.yaml: a misspelled server:
	// read as none sent the commands to the default address, and the
	// error that followed named anything but this file.
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0].Content
		for i := 0; i+1 < len(m); i += 2 {
			if k := m[i]; k.Value != "server" && k.Value != "token" {
				return c, usageError("%s:%d:%d: unknown key %q (%s)", path, k.Line, k.Column, k.Value, want)
			}
		}
	}
	if doc.Kind == 0 {
		return c, nil // an empty file, or comments only
	}
	if err := doc.Decode(&c); err != nil {
		return c, usageError("%s: %v (%s)", path, err, want)
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

// requestTimeout bounds one request; the API answers reads at once.
const requestTimeout = 30 * time.Second

// newAPIClient is a client of the server the flags, the environment or
// cli.yaml name, whose requests give up after timeout.
func newAPIClient(cf *clientFlags, timeout time.Duration) (*apiclient.Client, error) {
	if err := cf.resolveCLI(); err != nil {
		return nil, err
	}
	c, err := apiclient.New(cf.server, apiclient.WithToken(cf.token), apiclient.WithHTTPClient(&http.Client{Timeout: timeout}))
	if err != nil {
		return nil, usageError("--server %q: want a URL like http://127.0.0.1:1969", cf.server)
	}
	return c, nil
}
