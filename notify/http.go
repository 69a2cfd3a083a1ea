package notify

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
)

// maxResponse bounds how much of a response body a channel reads: robot
// APIs answer with a few dozen bytes; anything larger is not for us.
const maxResponse = 64 << 10

// HTTPResponse is the part of a webhook's answer a channel looks at.
type HTTPResponse struct {
	Status int
	Body   []byte
}

// Post posts body to rawURL as JSON, unless header sets another
// Content-Type, and returns the answer. Transport failures, 429 and 5xx are
// retryable; any other status outside 2xx is not. The error never contains
// the URL's credentials. A 2xx answer is returned with a nil error: robot
// APIs report their own failures inside a 200, and only the channel knows
// how to read them.
func Post(ctx context.Context, c *http.Client, rawURL string, body []byte, header http.Header) (HTTPResponse, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return HTTPResponse{}, false, fmt.Errorf("build request for %s: %s", RedactURL(rawURL), RedactText(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return HTTPResponse{}, true, redactTransportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return HTTPResponse{Status: resp.StatusCode}, true, fmt.Errorf("POST %s: read response: %w", RedactURL(rawURL), redactTransportError(err))
	}
	r := HTTPResponse{Status: resp.StatusCode, Body: data}
	if resp.StatusCode/100 == 2 {
		return r, false, nil
	}
	retryable := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	return r, retryable, &StatusError{URL: RedactURL(rawURL), Status: resp.StatusCode, Body: snippet(data)}
}

// StatusError is a webhook's non-2xx answer.
type StatusError struct {
	URL    string // redacted
	Status int
	Body   string // the start of the body, redacted
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("POST %s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// redactTransportError rewrites the URL that net/http puts in its errors.
// It keeps the chain (context.DeadlineExceeded, net.OpError) for errors.Is.
func redactTransportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: RedactURL(ue.URL), Err: redactedError{ue.Err}}
	}
	return redactedError{err}
}

// redactedError shows its cause's text with URLs redacted and unwraps to it.
type redactedError struct{ err error }

func (e redactedError) Error() string { return RedactText(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }

// snippet is the start of a response body, one line, for an error message.
func snippet(b []byte) string {
	const n = 200
	s := strings.Join(strings.Fields(string(b)), " ")
	return RedactText(Truncate(s, n))
}

// Truncate cuts s to at most n bytes without splitting a UTF-8 sequence,
// marking the cut with an ellipsis. Robot APIs reject long messages (WeCom:
// 4096 bytes of markdown), so a long digest is cut rather than refused.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	if n < len(mark) {
		return ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// EncodeJSON encodes v without escaping <, > and &: robot APIs take them
// as they are, and markdown mentions (<@id>) stay readable in logs.
func EncodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
