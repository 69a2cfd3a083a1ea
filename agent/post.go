package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
)

// maxAnswerBytes bounds how much of an answer the client reads: results for
// a few thousand events with error texts fit many times over.
const maxAnswerBytes = 8 << 20

// answerKind is what the sender does next with a request's events.
type answerKind int

const (
	answerResults  answerKind = iota // c.resp has one result per event
	answerRetry                      // resend all: network error, 5xx, 408, 429 without results
	answerTooLarge                   // 413: send fewer at a time
	answerRejected                   // the request as a whole is refused: do not resend
	answerStopped                    // the client is stopping
)

type answer struct {
	kind       answerKind
	status     int
	retryAfter time.Duration // the server's Retry-After, 0 if absent
	err        *apollo.Error // the server's reason, for rejected requests
	cause      error         // why a retry is needed, for the log
}

// post sends events as one JSON array and classifies the answer; per-event
// results land in c.resp.
func (c *Client) post(ctx context.Context, events []item) answer {
	size := 2
	for _, it := range events {
		size += len(it.data) + 1
	}
	// A fresh body per request: the transport may still read the previous
	// one after Do returns.
	body := make([]byte, 0, size)
	body = append(body, '[')
	for i, it := range events {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, it.data...)
	}
	body = append(body, ']')

	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return answer{kind: answerRejected, err: &apollo.Error{Code: apollo.EINVALID, Message: err.Error()}}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "apollo-agent-go")
	if c.cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.token)
	}
	resp, err := c.cfg.httpClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return answer{kind: answerStopped}
		}
		return answer{kind: answerRetry, cause: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	a := answer{status: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	if err != nil {
		if ctx.Err() != nil {
			return answer{kind: answerStopped}
		}
		a.kind, a.cause = answerRetry, fmt.Errorf("read answer: %w", err)
		return a
	}
	return c.classify(a, raw, len(events))
}

func (c *Client) classify(a answer, raw []byte, n int) answer {
	code := a.status
	decodeErr := decodeResults(raw, &c.resp)
	haveResults := decodeErr == nil && len(c.resp.Results) == n
	switch {
	case code/100 == 2 || code == http.StatusTooManyRequests:
		if haveResults {
			a.kind = answerResults
			return a
		}
		a.kind = answerRetry
		a.cause = fmt.Errorf("HTTP %d without one result per event (%d sent): %w", code, n,
			errors.Join(decodeErr, errors.New(string(raw[:min(len(raw), 200)]))))
	case code/100 == 5 || code == http.StatusRequestTimeout:
		a.kind, a.cause = answerRetry, fmt.Errorf("HTTP %d", code)
	case code == http.StatusRequestEntityTooLarge:
		a.kind = answerTooLarge
		a.err = &apollo.Error{Code: apollo.ETOOLARGE, Message: "request body over the server's limit",
			Hint: "an event this large cannot be sent; keep extra small"}
	default:
		// 400, 401, 403, 415 and anything this SDK does not expect: the
		// same request would fail the same way.
		a.kind = answerRejected
		a.err = c.resp.Error
		if decodeErr != nil || a.err == nil {
			a.err = &apollo.Error{Code: apollo.EINVALID, Message: fmt.Sprintf("HTTP %d", code)}
		}
	}
	return a
}

// retryAfter parses a Retry-After header in seconds, the form the server
// sends; other forms count as absent. A number too large for the
// arithmetic is the longest wait, not a negative one (an immediate retry).
func retryAfter(h string) time.Duration {
	if h == "" || strings.Trim(h, "0123456789") != "" {
		return 0
	}
	s, err := strconv.ParseUint(h, 10, 64)
	if err != nil || s >= uint64(maxRetryAfter/time.Second) {
		return maxRetryAfter
	}
	return time.Duration(s) * time.Second
}
