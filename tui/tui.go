package tui

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
)

// Options configure the dashboard. Zero values take the defaults.
type Options struct {
	// Server is the API's base URL, http:// or https://; the stream is the
	// same host over ws:// or wss://. Default http://127.0.0.1:1969.
	Server string
	// Token is sent as a bearer token; a server with no tokens (loopback
	// only) needs none.
	Token string
	// NoColor draws with text attributes only (NO_COLOR).
	NoColor bool

	Clock      apollo.Clock
	HTTPClient *http.Client

	// MetricsWindow is the window of the Jobs tab; default 5m.
	MetricsWindow time.Duration
	// Refresh is how often job metrics, alerts and silences are fetched
	// again; default 10s, negative: never.
	Refresh time.Duration
	// ReconnectMin and ReconnectMax bound the wait before reconnecting,
	// which doubles from one to the other with ±25% jitter; defaults
	// 500ms and 30s.
	ReconnectMin, ReconnectMax time.Duration
	// MaxTasks bounds the tasks kept in memory; default 5 000.
	MaxTasks int

	// noJitter makes the reconnect waits exact, for tests.
	noJitter bool
}

func (o *Options) setDefaults() {
	o.Server = cmp.Or(o.Server, "http://127.0.0.1:1969")
	o.Clock = cmp.Or[apollo.Clock](o.Clock, apollo.SystemClock)
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	o.MetricsWindow = cmp.Or(o.MetricsWindow, 5*time.Minute)
	o.Refresh = cmp.Or(o.Refresh, 10*time.Second)
	o.ReconnectMin = cmp.Or(o.ReconnectMin, 500*time.Millisecond)
	o.ReconnectMax = cmp.Or(o.ReconnectMax, 30*time.Second)
	o.MaxTasks = cmp.Or(o.MaxTasks, 5000)
}

func (o *Options) validate() error {
	u, err := url.Parse(o.Server)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return &apollo.Error{Code: apollo.EINVALID, Field: "server", Message: fmt.Sprintf("%q is not a server URL", o.Server),
			Hint: "write http://HOST:PORT or https://HOST, e.g. http://127.0.0.1:1969"}
	case o.MetricsWindow < 10*time.Second:
		return &apollo.Error{Code: apollo.EINVALID, Field: "MetricsWindow", Message: "below the 10s metric bucket", Hint: "use 1m or more"}
	case o.ReconnectMin < 0 || o.ReconnectMax < o.ReconnectMin:
		return &apollo.Error{Code: apollo.EINVALID, Field: "ReconnectMax", Message: "the reconnect bounds are reversed or negative"}
	case o.MaxTasks < 1:
		return &apollo.Error{Code: apollo.EINVALID, Field: "MaxTasks", Message: "must be positive"}
	}
	return nil
}

// streamURL is the WebSocket URL of the server's stream.
func (o *Options) streamURL() string {
	u, _ := url.Parse(o.Server) // validated
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/stream"
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// Run shows the dashboard until the user quits or ctx ends, then stops
// every command it started and waits for them. Program options (input and
// output, for instance) are passed on to Bubble Tea.
func Run(ctx context.Context, opts Options, progOpts ...tea.ProgramOption) error {
	m, err := New(opts)
	if err != nil {
		return err
	}
	defer m.Close()
	p := tea.NewProgram(m, append([]tea.ProgramOption{tea.WithContext(ctx)}, progOpts...)...)
	_, err = p.Run()
	if ctx.Err() != nil && err != nil {
		return nil // interrupted: not a failure
	}
	return err
}
