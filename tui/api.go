package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/tui/pages"
)

// restClient calls the server's REST API with the dashboard's token.
type restClient struct {
	base  string // http(s)://host:port, no trailing slash
	token string
	hc    *http.Client
}

// codeOf maps an HTTP status to an error code when the body has none (a
// proxy's page, or the plain 404 of a route the server does not have).
var codeOf = map[int]string{
	http.StatusBadRequest:          apollo.EINVALID,
	http.StatusUnauthorized:        apollo.EUNAUTHORIZED,
	http.StatusForbidden:           apollo.EFORBIDDEN,
	http.StatusNotFound:            apollo.ENOTFOUND,
	http.StatusConflict:            apollo.ECONFLICT,
	http.StatusTooManyRequests:     apollo.ETOOMANY,
	http.StatusServiceUnavailable:  apollo.EUNAVAILABLE,
	http.StatusMethodNotAllowed:    apollo.ENOTFOUND,
	http.StatusInternalServerError: apollo.EINTERNAL,
}

// do sends a request and decodes a JSON answer into out (when not nil).
// An error answer becomes the server's *apollo.Error, or one made from
// the status when the body is not the API's.
func (c *restClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return unreachable(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var eb struct {
			Error *apollo.Error `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
			return eb.Error
		}
		code, ok := codeOf[resp.StatusCode]
		if !ok {
			code = apollo.EINTERNAL
		}
		return &apollo.Error{Code: code, Message: fmt.Sprintf("%s %s: the server answered %s", method, path, resp.Status)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// metricsPage is the body of GET /api/v1/metrics.
type metricsPage struct {
	Window string      `json:"window"`
	Total  pages.Job   `json:"total"`
	Jobs   []pages.Job `json:"jobs"`
}

func (c *restClient) metrics(ctx context.Context, window time.Duration) (metricsPage, error) {
	var p metricsPage
	err := c.do(ctx, http.MethodGet, "/api/v1/metrics?window="+window.String(), nil, &p)
	return p, err
}

func (c *restClient) series(ctx context.Context, name string, window, step time.Duration) ([]pages.Job, error) {
	var p struct {
		Points []pages.Job `json:"points"`
	}
	q := url.Values{"window": {window.String()}, "step": {step.String()}}
	err := c.do(ctx, http.MethodGet, "/api/v1/metrics/"+url.PathEscape(name)+"?"+q.Encode(), nil, &p)
	return p.Points, err
}

func (c *restClient) task(ctx context.Context, id string) (apollo.Task, error) {
	var t apollo.Task
	err := c.do(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id), nil, &t)
	return t, err
}

func (c *restClient) alerts(ctx context.Context) ([]apollo.Alert, error) {
	var p struct {
		Alerts []apollo.Alert `json:"alerts"`
	}
	err := c.do(ctx, http.MethodGet, "/api/v1/alerts", nil, &p)
	return p.Alerts, err
}

func (c *restClient) ack(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/alerts/"+url.PathEscape(id)+"/ack", nil, nil)
}

func (c *restClient) silences(ctx context.Context) ([]pages.Silence, error) {
	var p struct {
		Silences []pages.Silence `json:"silences"`
	}
	err := c.do(ctx, http.MethodGet, "/api/v1/silences", nil, &p)
	return p.Silences, err
}

// silenceRequest is the body of POST /api/v1/silences: the alert's rule
// and group, like the web dashboard's form.
type silenceRequest struct {
	Rule     string            `json:"rule,omitempty"`
	Prefix   string            `json:"prefix,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	StartsAt time.Time         `json:"startsAt"`
	EndsAt   time.Time         `json:"endsAt"`
	Comment  string            `json:"comment"`
}

func (c *restClient) addSilence(ctx context.Context, s silenceRequest) error {
	return c.do(ctx, http.MethodPost, "/api/v1/silences", s, nil)
}

func (c *restClient) system(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.do(ctx, http.MethodGet, "/api/v1/system", nil, &raw)
	return raw, err
}

// notAvailable reports whether err says the server has no such route.
func notAvailable(err error) bool {
	var ae *apollo.Error
	return errors.As(err, &ae) && ae.Code == apollo.ENOTFOUND
}
