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
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxResponse bounds how much of a response body a channel reads: robot
// APIs answer with a few dozen bytes; anything larger is not for us.
const maxResponse = 64 << 10

// Endpoint is how an HTTP channel posts to its vendor and reads the answer.
// What differs between vendors is held here as data (the name in errors,
// headers, how a robot API reports its own failures inside a 200 and which
// of its codes are worth retrying); the body and the codes stay in each
// channel's package.
type Endpoint struct {
	// Channel is the channel type that starts every error: "dingtalk".
	Channel string
	Client  *http.Client // nil: http.DefaultClient
	// Header is sent with every request; the Content-Type is JSON unless
	// Header sets another.
	Header http.Header
	// Verdict reads a robot API's own verdict from a 2xx answer: its error
	// code (0 on success) and message. Nil: every 2xx is success.
	Verdict func(body []byte) (code int, msg string, err error)
	// CodeName is what the vendor calls that code, for errors: "errcode".
	CodeName string
	// Retryable are the vendor's codes worth retrying: every other one will
	// fail the same way next time.
	Retryable map[int]bool
}

// PostJSON posts payload, encoded by EncodeJSON, to rawURL: see Post.
func (e Endpoint) PostJSON(ctx context.Context, rawURL string, payload any) (bool, error) {
	body, err := EncodeJSON(payload)
	if err != nil {
		return false, fmt.Errorf("%s: encode: %w", e.Channel, err)
	}
	return e.Post(ctx, rawURL, body)
}

// Post posts body to rawURL and answers as a Notifier does. Transport
// failures, 408, 429 and 5xx are retryable, any other status outside 2xx is
// not; an answer Verdict cannot read is retryable, and a vendor's code is
// as Retryable says. No error contains the URL's credentials.
func (e Endpoint) Post(ctx context.Context, rawURL string, body []byte) (bool, error) {
	answer, retryable, err := post(ctx, e.Client, rawURL, body, e.Header)
	if err != nil {
		return retryable, fmt.Errorf("%s: %w", e.Channel, err)
	}
	if e.Verdict == nil {
		return false, nil
	}
	code, msg, err := e.Verdict(answer)
	if err != nil {
		return true, fmt.Errorf("%s: unreadable answer %q: %w", e.Channel, snippet(answer, secretsOf(rawURL, e.Header)), err)
	}
	if code != 0 {
		return e.Retryable[code], fmt.Errorf("%s: %s %d: %s", e.Channel, e.CodeName, code, scrub(msg, secretsOf(rawURL, e.Header)))
	}
	return false, nil
}

// secretsOf is what a request to rawURL with header carries that an
// answer quoting it (a gateway's 401 naming the token it refused, a
// proxy's page naming the path it could not route) must not show: header
// values other than the content type, and their long words (the token of
// "Bearer token"); the URL's password, query values and token-like path
// segments, as sent and unescaped.
func secretsOf(rawURL string, header http.Header) []string {
	var out []string
	add := func(v string) {
		if len(v) >= 8 {
			out = append(out, v)
			if u, err := url.QueryUnescape(v); err == nil && u != v {
				out = append(out, u)
			}
		}
	}
	for k, vs := range header {
		if k == "Content-Type" {
			continue
		}
		for _, v := range vs {
			add(v)
			for _, w := range strings.Fields(v) {
				add(w)
			}
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return out
	}
	if p, ok := u.User.Password(); ok {
		add(p)
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok {
			add(v)
		}
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if looksLikeToken(seg) {
			add(seg)
		}
	}
	// The longest first: a secret that holds another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// scrub replaces each of secrets in s with REDACTED, then redacts the
// URLs in it.
func scrub(s string, secrets []string) string {
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "REDACTED")
	}
	return RedactText(s)
}

// ErrCode is the Verdict of the answer DingTalk and WeCom robots share:
// {"errcode":0,"errmsg":"ok"}.
func ErrCode(body []byte) (int, string, error) {
	var a struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	err := json.Unmarshal(body, &a)
	return a.ErrCode, a.ErrMsg, err
}

// post posts body to rawURL as JSON, unless header sets another
// Content-Type, and returns the answer's body. Transport failures, 408,
// 429 and 5xx are retryable; any other status outside 2xx is not, a redirect
// included: it is not followed (withoutRedirects). The error never
// contains the URL's credentials. A 2xx answer is returned with a nil
// error: robot APIs report their own failures inside a 200, and only the
// channel knows how to read them.
func post(ctx context.Context, c *http.Client, rawURL string, body []byte, header http.Header) ([]byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return nil, false, fmt.Errorf("build request for %s: %s", RedactURL(rawURL), RedactText(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := withoutRedirects(c).Do(req)
	if err != nil {
		return nil, true, redactTransportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		e := &StatusError{URL: RedactURL(rawURL), Status: resp.StatusCode}
		if loc, err := resp.Location(); err == nil {
			e.Location = RedactURL(loc.String())
		}
		return nil, false, e
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, true, fmt.Errorf("POST %s: read response: %w", RedactURL(rawURL), redactTransportError(err))
	}
	if resp.StatusCode/100 == 2 {
		return data, false, nil
	}
	// 408: the server (or a proxy before it) timed the request out, as a
	// network failure would; it asks for the request again.
	retryable := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500
	return data, retryable, &StatusError{URL: RedactURL(rawURL), Status: resp.StatusCode, Body: snippet(data, secretsOf(rawURL, header)),
		RetryAfter: retryAfter(resp.Header)}
}

// maxRetryAfter bounds the wait a Retry-After header may ask for: past
// it, or past the channel's give_up_after, the lane gives up.
const maxRetryAfter = 7 * 24 * time.Hour

// retryAfter reads a Retry-After header: whole seconds, or an HTTP date,
// counted from the answer's own Date (so that neither clock's offset
// matters; without a Date the date form is not used). 0 when there is
// none or it cannot be read.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	now, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return 0
	}
	return min(max(at.Sub(now), 0), maxRetryAfter)
}

// askedToWait is how long a failed attempt's endpoint asked to be left
// alone before the next (a Retry-After header), 0 if it did not.
func askedToWait(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

// AnswerRedirects, as an http.Client's CheckRedirect, makes a redirect the
// answer instead of following it. Following one would be a lie for a
// call to a user's URL (a channel, the dead man's switch): after a 301,
// 302 or 303 the POST comes back as a GET without its body, and an
// endpoint behind a sign-in proxy answers that GET with its sign-in page
// and a 200, which would count as sent; a 307 or 308 would carry the
// call's headers, its secrets among them, to whatever host the answer
// names.
func AnswerRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// withoutRedirects is c (nil: http.DefaultClient) with AnswerRedirects.
func withoutRedirects(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	nc := *c
	nc.CheckRedirect = AnswerRedirects
	return &nc
}

// StatusError is a webhook's non-2xx answer.
type StatusError struct {
	URL    string // redacted
	Status int
	Body   string // the start of the body, redacted
	// Location is where a redirect (3xx) pointed, redacted; channels do
	// not follow redirects.
	Location string
	// RetryAfter is the wait the answer's Retry-After asked for (429,
	// 503), 0 if none: the lane waits at least that long to retry.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("POST %s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Status/100 == 3 {
		s += ": channels do not follow redirects (the message would not arrive as sent); " +
			"set the channel's url to the address that takes the POST"
		if e.Location != "" {
			s += "; the answer pointed to " + e.Location
		}
		return s
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (Retry-After: %v)", e.RetryAfter)
	}
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

// snippet is the start of a response body, one line, for an error
// message, without secrets.
func snippet(b []byte, secrets []string) string {
	const n = 200
	s := strings.Join(strings.Fields(scrub(string(b), secrets)), " ")
	return Truncate(s, n)
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

// TruncateJSON cuts s, as Truncate does, so that it takes at most n bytes
// once written as a JSON string by EncodeJSON (without its quotes): a
// quote or a backslash takes two bytes there, a control character or a
// line separator six. Feishu limits the request body, not the text, so a
// text of quotes cut to n bytes would still be refused at twice the size.
func TruncateJSON(s string, n int) string {
	size := func(r rune) int {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			return 2
		case r < 0x20 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
			return 6 // \u001b; an invalid byte is written as \ufffd
		}
		return utf8.RuneLen(r)
	}
	const mark = "…"
	used, cut := 0, 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if used+size(r) <= n-len(mark) {
			cut = i // the text that fits with the mark
		}
		if used += size(r); used > n {
			if n < len(mark) {
				return ""
			}
			return s[:cut] + mark
		}
	}
	return s
}

// TruncateWithTail is Truncate(s, n) followed by tail, keeping the result
// within n bytes: tail (a robot's mentions, which ping people only when the
// text names them) survives a cut of a long s. A tail longer than n is cut
// with the rest.
func TruncateWithTail(s, tail string, n int) string {
	if len(tail) > n {
		return Truncate(s+tail, n)
	}
	return Truncate(s, n-len(tail)) + tail
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
