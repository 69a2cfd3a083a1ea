package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/apollo-11/apollo"
)

// maxAnswer bounds an answer the client reads: a page of 1 000 tasks with
// their histories is well under it.
const maxAnswer = 64 << 20

// Client calls one server's REST API. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends the token as a bearer token on every request. A server
// without tokens (loopback only) needs none.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends the requests with hc instead of
// http.DefaultClient: for a timeout, a proxy or TLS settings.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the server at base, an http:// or https:// URL
// with an optional path prefix (a reverse proxy's).
func New(base string, opts ...Option) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &apollo.Error{Code: apollo.EINVALID, Field: "server", Message: fmt.Sprintf("%q is not a server URL", base),
			Hint: "want a URL like http://127.0.0.1:1969"}
	}
	c := &Client{base: strings.TrimSuffix(base, "/"), hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Server is the base URL the client calls.
func (c *Client) Server() string { return c.base }

// request is one call: what to send and what the answer is read into.
type request struct {
	method, path string
	query        url.Values
	body         []byte
	contentType  string
}

// roundTrip sends r and returns the answer's status and body, whatever the
// status. A request that gets no answer is an *UnreachableError.
func (c *Client) roundTrip(ctx context.Context, r request) (*http.Response, []byte, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, &UnreachableError{Server: c.base, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: reading the answer: %w", r.method, r.path, err)
	}
	return resp, raw, nil
}

// do sends r and decodes a 2xx answer into out (when not nil); any other
// answer is an *Error.
func (c *Client) do(ctx context.Context, r request, out any) error {
	resp, raw, err := c.roundTrip(ctx, r)
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(c.base, r.method, r.path, resp, raw)
	}
	return decode(r, raw, out)
}

func decode(r request, raw []byte, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not what this client understands: %w (is the server the same version?)", r.method, r.path, err)
	}
	return nil
}

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, request{method: http.MethodGet, path: path, query: q}, out)
}

// send sends v (when not nil) as JSON and decodes the answer into out.
func (c *Client) send(ctx context.Context, method, path string, v, out any) error {
	r := request{method: method, path: path}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		r.body, r.contentType = b, "application/json"
	}
	return c.do(ctx, r, out)
}

// segment escapes one path segment: a task ID may hold '/', '#' or '?',
// and one stored before "." and ".." were refused is sent as %2E and
// %2E%2E, which the server reads as the ID and no URL cleaning removes.
func segment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}
