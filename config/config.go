package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// Duration is a time.Duration written as "90s", "5m", "1h30m".
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (write e.g. 30s, 5m, 1h)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Config is apollo.yaml. Field comments are the documentation of each key
// (docs/operations.md repeats them with examples).
type Config struct {
	Listen        string   `yaml:"listen"`         // host:port of the HTTP API and dashboard
	Data          string   `yaml:"data"`           // data directory: log segments and snapshots
	Fsync         string   `yaml:"fsync"`          // batch | interval | off
	SnapshotEvery Duration `yaml:"snapshot_every"` // how often the state is checkpointed
	// SnapshotEvents checkpoints also once this many records were logged
	// since the last snapshot, so that a restart after kill -9 replays at
	// most about this many whatever the ingest rate (0: by time only).
	SnapshotEvents int64  `yaml:"snapshot_events"`
	ExternalURL    string `yaml:"external_url"` // how people reach the dashboard (links in messages)
	// GCPercent is the Go garbage collector's target (GOGC) for the server
	// processes: 200 trades memory (up to ~3x the live heap) for 13-18%
	// fewer instructions per event than Go's 100 (docs/benchmarks.md). The GOGC
	// environment variable, when set, wins.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimitMiB is a soft limit on the server process's memory
	// (Go's GOMEMLIMIT, in MiB): near it the collector runs more often
	// instead of letting the heap grow to GCPercent's target, which under
	// heavy load on few cores can be far above the live data. 0: none.
	// The GOMEMLIMIT environment variable, when set, wins.
	MemoryLimitMiB int64 `yaml:"memory_limit_mib"`

	TLS  TLS  `yaml:"tls"`
	Auth Auth `yaml:"auth"`

	Limits    Limits     `yaml:"limits"`
	Retention Retention  `yaml:"retention"`
	Lateness  []Lateness `yaml:"lateness"`
	// RunTimeout is the deadline of a running run that sent no timeoutMs
	// and whose job has no lateness[].timeout: past it the server marks the
	// run timeout, so that no run stays running for ever.
	RunTimeout Duration `yaml:"run_timeout"`

	Rules string `yaml:"rules"` // rule file, hot-reloaded
	// Expectations is the default tenant's job expectations file
	// (docs/expectations.md), hot-reloaded like the rules file.
	Expectations string `yaml:"expectations"`
	Jobs         string `yaml:"jobs"` // scheduler jobs file (runs the scheduler in-process)
	// Channels are the notification channels by name, each with its settings
	// and the tenants it serves ("tenants:"; none: the default tenant's);
	// notify/channels.Build reads them (docs/notifications.md).
	Channels map[string]map[string]any `yaml:"channels"`
	Alert    Alert                     `yaml:"alert"`
	Redis    Redis                     `yaml:"redis"`
	Deadman  Deadman                   `yaml:"deadman"`
}

// TLS serves HTTPS from a certificate and key.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Auth configures tokens (docs/security.md).
type Auth struct {
	Tokens         []Token `yaml:"tokens"`
	InsecureNoAuth bool    `yaml:"insecure_no_auth"`
	// AllowedOrigins for the WebSocket stream, besides the server's own.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedHosts are host names a server without tokens answers to,
	// besides addresses, loopback names and the names in listen and
	// external_url: a reverse proxy's (docs/security.md).
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Token is one credential, stored as the SHA-256 of its secret.
type Token struct {
	Name    string `yaml:"name"`
	SHA256  string `yaml:"sha256"`
	Role    string `yaml:"role"`
	Tenant  string `yaml:"tenant"`
	RateMax int    `yaml:"rate"` // events per second this token may ingest; 0 = the default
	// JobPrefix limits an agent token to jobs whose names start with it
	// (a per-job ping key).
	JobPrefix string `yaml:"job_prefix"`
}

// Limits bound memory and request sizes.
type Limits struct {
	BodyBytes    int64 `yaml:"body_bytes"`
	TaskQueue    int   `yaml:"task_queue"`
	HoldingArea  int   `yaml:"holding_area"`
	Queue        int   `yaml:"queue"`
	Tasks        int   `yaml:"tasks"` // in memory, all tenants together
	History      int   `yaml:"history"`
	IngestPerSec int   `yaml:"ingest_per_second"` // per token
	// TenantTasks is each tenant's share of Tasks (0: all of it), so that
	// one tenant cannot take the others' room; Tenants overrides it.
	TenantTasks int                     `yaml:"tenant_tasks"`
	Tenants     map[string]TenantLimits `yaml:"tenants"`
	// StreamClients bounds the live streams (GET /api/v1/stream) open at
	// once, and TenantStreamClients those of one tenant (0: all of
	// StreamClients): each holds a file descriptor and memory.
	StreamClients       int `yaml:"stream_clients"`
	TenantStreamClients int `yaml:"tenant_stream_clients"`
	// Connections bounds the HTTP connections open at once, streams
	// included: each holds a file descriptor from its accept, before
	// anyone knows who opened it (docs/operations.md).
	Connections int `yaml:"connections"`
}

// TenantLimits are the limits of one tenant.
type TenantLimits struct {
	Tasks int `yaml:"tasks"` // tasks in memory; 0: limits.tenant_tasks
}

// TenantTaskLimits returns the task limit of every tenant that has one.
func (l Limits) TenantTaskLimits() map[string]int {
	m := make(map[string]int, len(l.Tenants))
	for tenant, tl := range l.Tenants {
		if tl.Tasks > 0 {
			m[tenant] = tl.Tasks
		}
	}
	return m
}

// Retention says how long things are kept.
type Retention struct {
	Finished Duration `yaml:"finished"` // finished tasks in memory
	Idle     Duration `yaml:"idle"`     // unfinished tasks with no event
	Dedup    Duration `yaml:"dedup"`    // late duplicates still recognised
	Reorder  Duration `yaml:"reorder"`  // out-of-order events wait for the missing ones
	Buckets  Duration `yaml:"buckets"`  // 10-second metric buckets
	Rollups  Duration `yaml:"rollups"`  // 1-minute metric rollups
	Archive  Duration `yaml:"archive"`  // finished tasks on disk, for queries
}

// Lateness sets thresholds for jobs whose name starts with Prefix.
type Lateness struct {
	Prefix      string   `yaml:"prefix"`
	StartAfter  Duration `yaml:"start_after"`
	MissedAfter Duration `yaml:"missed_after"`
	Timeout     Duration `yaml:"timeout"`
}

// Alert configures evaluation and delivery.
type Alert struct {
	Interval    Duration `yaml:"interval"`     // rule evaluation period
	DedupWindow Duration `yaml:"dedup_window"` // the same notification at most once per window
	Repeat      Duration `yaml:"repeat"`       // re-notify a firing, unacknowledged alert
	Heartbeat   Duration `yaml:"heartbeat"`    // self-monitoring heartbeat period
}

// Deadman is the outbound heartbeat, a dead man's switch: every Every,
// each process (server, bus, alert, sched) calls URL, so that something
// outside notices when the calls stop (docs/monitoring.md). URL may be an
// Apollo-11 ping URL of another instance, a healthchecks-style URL or any
// webhook; {process} in it becomes the process's kind. Empty: off.
type Deadman struct {
	URL     string   `yaml:"url"`
	Every   Duration `yaml:"every"`   // default 5m
	Method  string   `yaml:"method"`  // GET (default) or POST, with a JSON body saying who calls
	Timeout Duration `yaml:"timeout"` // for one call; default 10s
}

// Redis is the shared store of the multi-process mode.
type Redis struct {
	URL    string `yaml:"url"`
	Prefix string `yaml:"prefix"`
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Listen:         "127.0.0.1:1969",
		Data:           "apollo-data",
		Fsync:          "batch",
		SnapshotEvery:  Duration(5 * time.Minute),
		SnapshotEvents: 5_000_000,
		RunTimeout:     Duration(24 * time.Hour),
		GCPercent:      200,
		Limits: Limits{
			BodyBytes: 4 << 20, TaskQueue: 64, HoldingArea: 10_000, Queue: 1 << 18,
			Tasks: 2_000_000, History: 64, IngestPerSec: 50_000,
			StreamClients: 4_000, TenantStreamClients: 1_000, Connections: 10_000,
		},
		Retention: Retention{
			Finished: Duration(time.Hour), Idle: Duration(7 * 24 * time.Hour), Dedup: Duration(24 * time.Hour),
			Reorder: Duration(30 * time.Second), Buckets: Duration(time.Hour), Rollups: Duration(24 * time.Hour),
			Archive: Duration(7 * 24 * time.Hour),
		},
		Alert: Alert{
			Interval: Duration(10 * time.Second), DedupWindow: Duration(2 * time.Minute),
			Repeat: Duration(4 * time.Hour), Heartbeat: Duration(5 * time.Minute),
		},
		Redis:   Redis{Prefix: "apollo"},
		Deadman: Deadman{Every: Duration(5 * time.Minute), Method: "GET", Timeout: Duration(10 * time.Second)},
	}
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Load reads a configuration file over the defaults. ${NAME} in values
// expands from getenv; a reference to an unset variable is an error, so a
// missing secret is caught at start-up.
func Load(path string, getenv func(string) string) (Config, error) {
	c := Default()
	src, err := sourcefile.Read(path, "configuration file", sourcefile.MaxSize)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := c.parse(path, src, getenv); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Config) parse(path string, src []byte, getenv func(string) string) error {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		// The library names no place for a character it refuses: find
		// it, since it is often invisible.
		if bad := sourcefile.BadChar(src, "a configuration file"); bad != nil && sourcefile.Refused(err.Error()) {
			return fmt.Errorf("config: %s:%d:%d: %s (%s)", path, bad.Line, bad.Col, bad.Message, bad.Hint)
		}
		return fmt.Errorf("config: %s: %w", path, err)
	}
	if len(root.Content) == 0 {
		return nil // an empty file: defaults
	}
	var missing []string
	expand(&root, func(name string, line int) string {
		v := getenv(name)
		if v == "" {
			missing = append(missing, fmt.Sprintf("%s:%d: ${%s} is not set in the environment", path, line, name))
		}
		return v
	})
	if len(missing) > 0 {
		return errors.New("config: " + strings.Join(missing, "; "))
	}
	// Decode the expanded tree strictly: re-encode it and decode with KnownFields.
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(&root); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config: %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

// expand replaces ${NAME} in every scalar value (not in keys), in place.
func expand(n *yaml.Node, lookup func(name string, line int) string) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
			return lookup(m[2:len(m)-1], n.Line)
		})
		return
	}
	for i, ch := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			continue // a key
		}
		expand(ch, lookup)
	}
}

// ApplyEnv overrides keys from APOLLO_* variables.
func (c *Config) ApplyEnv(getenv func(string) string) {
	for name, dst := range map[string]*string{
		"APOLLO_LISTEN": &c.Listen, "APOLLO_DATA": &c.Data, "APOLLO_FSYNC": &c.Fsync,
		"APOLLO_RULES": &c.Rules, "APOLLO_EXPECTATIONS": &c.Expectations, "APOLLO_JOBS": &c.Jobs, "APOLLO_REDIS": &c.Redis.URL,
		"APOLLO_EXTERNAL_URL": &c.ExternalURL, "APOLLO_DEADMAN_URL": &c.Deadman.URL,
	} {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
}

// Validate checks the whole configuration and reports every problem.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (e.g. 127.0.0.1:1969)", c.Listen)
	}
	switch c.Fsync {
	case "batch", "interval", "off":
	default:
		bad("fsync", "%q: use batch, interval or off", c.Fsync)
	}
	if c.Data == "" {
		bad("data", "empty: name a directory for the log and snapshots")
	}
	if c.SnapshotEvents < 0 {
		bad("snapshot_events", "%d: use a count of records, or 0 to checkpoint by time only", c.SnapshotEvents)
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls", "set both cert and key, or neither")
	}
	if c.ExternalURL != "" {
		// Messages link to it and a server without tokens answers to its
		// host: a value that is not an address would break both quietly.
		if !isHTTPURL(c.ExternalURL) {
			bad("external_url", "%q is not an http(s) address: write how people reach the dashboard, e.g. https://apollo.example.com", c.ExternalURL)
		}
	}
	for name, d := range map[string]Duration{
		"snapshot_every": c.SnapshotEvery, "alert.interval": c.Alert.Interval, "run_timeout": c.RunTimeout,
		"retention.finished": c.Retention.Finished, "retention.buckets": c.Retention.Buckets,
		"retention.rollups": c.Retention.Rollups, "retention.dedup": c.Retention.Dedup,
		"alert.heartbeat": c.Alert.Heartbeat, "deadman.every": c.Deadman.Every, "deadman.timeout": c.Deadman.Timeout,
	} {
		if d <= 0 {
			bad(name, "must be positive")
		}
	}
	if c.Retention.Rollups < c.Retention.Buckets {
		bad("retention.rollups", "%v is shorter than retention.buckets %v", c.Retention.Rollups.D(), c.Retention.Buckets.D())
	}
	if c.MemoryLimitMiB < 0 {
		bad("memory_limit_mib", "%d: use a size in MiB, or 0 for no limit", c.MemoryLimitMiB)
	}
	if c.GCPercent < 0 {
		bad("gc_percent", "%d: use a positive percentage (Go's default is 100)", c.GCPercent)
	}
	for key, v := range map[string]int{"limits.tasks": c.Limits.Tasks, "limits.queue": c.Limits.Queue,
		"limits.holding_area": c.Limits.HoldingArea, "limits.task_queue": c.Limits.TaskQueue, "limits.history": c.Limits.History} {
		if v < 0 {
			bad(key, "%d: use a number, or leave it out for the default", v)
		}
	}
	if c.Limits.TenantTasks < 0 {
		bad("limits.tenant_tasks", "%d: use a number of tasks, or 0 for limits.tasks", c.Limits.TenantTasks)
	}
	for tenant, tl := range c.Limits.Tenants {
		if tl.Tasks < 0 {
			bad(fmt.Sprintf("limits.tenants[%q].tasks", tenant), "%d: use a number of tasks, or 0 for limits.tenant_tasks", tl.Tasks)
		}
	}
	if c.Limits.StreamClients < 1 {
		bad("limits.stream_clients", "%d: use a number of streams, at least 1", c.Limits.StreamClients)
	}
	if c.Limits.Connections < 16 {
		bad("limits.connections", "%d: use a number of connections, at least 16", c.Limits.Connections)
	}
	if c.Limits.IngestPerSec < 0 { // read as no limit, as 0 is
		bad("limits.ingest_per_second", "%d: use a number of events per second per token, or 0 for no limit", c.Limits.IngestPerSec)
	}
	if c.Limits.TenantStreamClients < 0 {
		bad("limits.tenant_stream_clients", "%d: use a number of streams, or 0 for limits.stream_clients", c.Limits.TenantStreamClients)
	}
	if c.Limits.BodyBytes < apollo.MaxEventBytes {
		bad("limits.body_bytes", "%d is smaller than the largest event the server accepts (%d bytes): use at least %d", c.Limits.BodyBytes, apollo.MaxEventBytes, apollo.MaxEventBytes)
	}
	firstOf := map[string]int{} // a token's hash -> its first line
	for i, t := range c.Auth.Tokens {
		key := fmt.Sprintf("auth.tokens[%d]", i)
		if len(t.SHA256) != 64 {
			bad(key+".sha256", "must be the 64 hex digits that `apollo token create` prints")
		} else if j, ok := firstOf[strings.ToLower(t.SHA256)]; ok {
			// The server would take the secret for one of the lines only.
			bad(key+".sha256", "the secret of auth.tokens[%d] (%s) too: one secret would be two tokens; give each line its own token (apollo token create)", j, c.Auth.Tokens[j].Name)
		} else {
			firstOf[strings.ToLower(t.SHA256)] = i
		}
		switch t.Role {
		case "agent", "viewer", "operator", "admin":
		default:
			bad(key+".role", "%q: use agent, viewer, operator or admin", t.Role)
		}
		// What apollo token create refuses in its flags (cmd/apollo/token.go),
		// refused in a line written by hand: a negative rate reads as no
		// limit at all, and a prefix narrows only what an agent reports.
		if t.RateMax < 0 {
			bad(key+".rate", "%d: use a number of events per second, or 0 for limits.ingest_per_second", t.RateMax)
		}
		if t.JobPrefix != "" && t.Role != "agent" {
			bad(key+".job_prefix", "limits what an agent token reports; a token of role %s would still do all that role allows (use role: agent, or leave out job_prefix)", t.Role)
		}
	}
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"auth.allowed_hosts", c.Auth.AllowedHosts}, {"auth.allowed_origins", c.Auth.AllowedOrigins}} {
		for i, p := range list.patterns {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				bad(fmt.Sprintf("%s[%d]", list.key, i), "%q is not a name or a pattern like *.example.com", p)
			}
		}
	}
	for i, l := range c.Lateness {
		if l.StartAfter < 0 || l.MissedAfter < 0 || l.Timeout < 0 {
			bad(fmt.Sprintf("lateness[%d]", i), "durations must not be negative")
		}
	}
	c.validateDeadman(bad)
	c.checkTenants(bad)
	c.checkDataFiles(bad)
	for name, ch := range c.Channels {
		if _, ok := ch["type"].(string); !ok {
			bad("channels."+name+".type", "missing: dingtalk, email, wecom, feishu, slack, webhook or console")
		}
	}
	return errors.Join(errs...)
}

// isHTTPURL says whether s is an absolute http or https URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func (c *Config) validateDeadman(bad func(key, format string, args ...any)) {
	d := c.Deadman
	if d.URL != "" {
		if !isHTTPURL(strings.ReplaceAll(d.URL, "{process}", "server")) {
			// Not quoted back: a ping URL holds its key.
			bad("deadman.url", "not an http(s) URL (write e.g. https://hc-ping.com/<uuid> or http://other-apollo:1969/ping/apollo_{process}?key=...)")
		}
	}
	switch d.Method {
	case "GET", "POST":
	default:
		bad("deadman.method", "%q: use GET or POST", d.Method)
	}
	if d.Timeout > 0 && d.Timeout >= d.Every {
		bad("deadman.timeout", "%v is not shorter than deadman.every %v", d.Timeout.D(), d.Every.D())
	}
}
