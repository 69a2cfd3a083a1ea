package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/sourcefile"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		env       map[string]string
		err       string
		check     func(t *testing.T, c Config)
	}{
		{"empty file keeps defaults", "", nil, "", func(t *testing.T, c Config) {
			if c.Listen != "127.0.0.1:1969" || c.Fsync != "batch" || c.Alert.Interval.D() != 10*time.Second {
				t.Errorf("defaults changed: %+v", c)
			}
		}},
		{"values and durations", "listen: 0.0.0.0:8080\nsnapshot_every: 90s\nretention:\n  finished: 2h\n", nil, "", func(t *testing.T, c Config) {
			if c.Listen != "0.0.0.0:8080" || c.SnapshotEvery.D() != 90*time.Second || c.Retention.Finished.D() != 2*time.Hour {
				t.Errorf("got %+v", c)
			}
			if c.Retention.Buckets.D() != time.Hour {
				t.Error("a sibling default was lost")
			}
		}},
		{"secrets from the environment", "channels:\n  ding:\n    type: dingtalk\n    secret: ${DING_SECRET}\n    url: https://x/?t=${DING_TOKEN}\n",
			map[string]string{"DING_SECRET": "s3cr#t: x", "DING_TOKEN": "abc"}, "", func(t *testing.T, c Config) {
				if c.Channels["ding"]["secret"] != "s3cr#t: x" || c.Channels["ding"]["url"] != "https://x/?t=abc" {
					t.Errorf("channels %+v", c.Channels)
				}
			}},
		{"unset variable", "channels:\n  ding:\n    type: dingtalk\n    secret: ${NOPE}\n", nil, "apollo.yaml:4: ${NOPE} is not set", nil},
		{"unknown key with its line", "listen: a:1\nlisten_addr: b\n", nil, "line 2: field listen_addr not found", nil},
		{"bad duration", "snapshot_every: soon\n", nil, `"soon" is not a duration`, nil},
		// A character YAML refuses is placed, with its code: the library
		// says "control characters are not allowed" and nothing of where.
		{"control character", "listen: 127.0.0.1:1969\ndata: \"/var/\x1b[2Jlib\"\n", nil,
			`config: apollo.yaml:2:13: a control character (U+001B) is not allowed in a configuration file (remove it; in a double-quoted value write it as an escape, like "\x1b")`, nil},
		{"not UTF-8", "# caf\xe9\nlisten: 127.0.0.1:1969\n", nil, `config: apollo.yaml:1:6: a byte that is not UTF-8 (0xE9) (save the file as UTF-8)`, nil},
		{"dead man's switch", "deadman:\n  url: https://hc-ping.com/${HC}\n  every: 1m\n  method: POST\n", map[string]string{"HC": "u-1"}, "", func(t *testing.T, c Config) {
			if c.Deadman.URL != "https://hc-ping.com/u-1" || c.Deadman.Every.D() != time.Minute || c.Deadman.Method != "POST" || c.Deadman.Timeout.D() != 10*time.Second {
				t.Errorf("deadman %+v", c.Deadman)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "apollo.yaml")
			os.WriteFile(p, []byte(tt.src), 0o600)
			c, err := Load(p, env(tt.env))
			if tt.err != "" {
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), p, "apollo.yaml"), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestValidateReportsEverything(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Listen = "nohost"
	c.Fsync = "always"
	c.TLS.Cert = "x.pem"
	c.Auth.Tokens = []Token{{SHA256: "abc", Role: "root"}}
	c.Channels = map[string]map[string]any{"x": {}}
	c.MemoryLimitMiB = -1
	c.Auth.AllowedHosts = []string{"ok.example", "[bad"}
	c.Auth.AllowedOrigins = []string{""}
	c.Alert.Heartbeat = 0
	c.ExternalURL = "apollo.example.com"
	c.Deadman = Deadman{URL: "ftp://h/x?key=s3cret", Every: Duration(time.Minute), Method: "PUT", Timeout: Duration(time.Minute)}
	err := c.Validate()
	for _, want := range []string{"listen:", "fsync:", "tls:", "auth.tokens[0].sha256", "auth.tokens[0].role", "channels.x.type", "memory_limit_mib:",
		`auth.allowed_hosts[1]: "[bad" is not a name`, "auth.allowed_origins[0]",
		"alert.heartbeat: must be positive", `external_url: "apollo.example.com" is not an http(s) address`, "deadman.url: not an http(s) URL", "deadman.method:", "deadman.timeout: 1m0s is not shorter than deadman.every"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the URL's key: %v", err)
	}
	if d := Default(); d.Validate() != nil {
		t.Errorf("defaults do not validate: %v", d.Validate())
	}
}

func TestApplyEnv(t *testing.T) {
	t.Parallel()
	c := Default()
	c.ApplyEnv(env(map[string]string{"APOLLO_LISTEN": "127.0.0.1:9", "APOLLO_REDIS": "redis://x", "APOLLO_DEADMAN_URL": "https://hc/x"}))
	if c.Listen != "127.0.0.1:9" || c.Redis.URL != "redis://x" || c.Data != "apollo-data" || c.Deadman.URL != "https://hc/x" {
		t.Errorf("%+v", c)
	}
}

// FuzzParse: parse never panics, and a character YAML refuses is
// reported at its line and column.
func FuzzParse(f *testing.F) {
	f.Add([]byte("listen: a:1\nchannels:\n  x:\n    type: ${T}\n"))
	f.Add([]byte("lateness:\n  - prefix: a\n    timeout: 1m\n"))
	f.Add([]byte("listen: 127.0.0.1:1969\ndata: \"/var/\x1b[2Jlib\"\n"))
	f.Add([]byte("# caf\xe9\nlisten: 127.0.0.1:1969\n"))
	f.Add([]byte("channels:\n  c: {type: console, tenants: [\"t\\r\"]}\n\x00"))
	f.Add([]byte("auth:\n  tokens:\n    - {role: admin, tenant: \"a\u0085b\", sha256: ab}\r\n"))
	placed := regexp.MustCompile(`^config: f\.yaml:\d+:\d+: `)
	f.Fuzz(func(t *testing.T, src []byte) {
		c := Default()
		err := c.parse("f.yaml", src, func(string) string { return "v" })
		if err != nil && sourcefile.Refused(err.Error()) && sourcefile.BadChar(src, "a configuration file") != nil && !placed.MatchString(err.Error()) {
			t.Fatalf("parse(%q) = %v: a refused character without its place", src, err)
		}
	})
}

// A tenant's name is read in messages, logs and the dashboard: a control
// character or a space at an end is refused wherever the configuration
// names a tenant, with the key.
// A line of auth.tokens written by hand is refused where apollo token
// create refuses its flags: a negative rate was read as no limit at all,
// and a job prefix on a role other than agent looked limited and was not.
func TestTokensCheckedAsTokenCreateChecks(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct{ yaml, want string }{
		{"auth:\n  tokens:\n    - {role: agent, tenant: a, rate: -1, sha256: " + hash + "}\n",
			"auth.tokens[0].rate: -1: use a number of events per second, or 0 for limits.ingest_per_second"},
		{"auth:\n  tokens:\n    - {role: agent, tenant: a, sha256: " + hash + "}\n    - {role: agent, tenant: b, rate: -9223372036854775808, sha256: " + hash + "}\n",
			"auth.tokens[1].rate: -9223372036854775808: use a number of events per second"},
		{"limits:\n  ingest_per_second: -50000\n",
			"limits.ingest_per_second: -50000: use a number of events per second per token, or 0 for no limit"},
		{"auth:\n  tokens:\n    - {role: viewer, tenant: b, job_prefix: backup, sha256: " + hash + "}\n",
			"auth.tokens[0].job_prefix: limits what an agent token reports; a token of role viewer would still do all that role allows (use role: agent, or leave out job_prefix)"},
		{"auth:\n  tokens:\n    - {role: admin, job_prefix: backup, sha256: " + hash + "}\n",
			"auth.tokens[0].job_prefix: limits what an agent token reports; a token of role admin would"},
		// One secret on two lines was the token of the last one, silently:
		// a token copied to another tenant acted there, wherever the first
		// line said it belonged.
		{"auth:\n  tokens:\n    - {name: ci, role: agent, tenant: a, sha256: " + hash + "}\n    - {name: x, role: viewer, sha256: " + strings.Repeat("cd", 32) + "}\n    - {name: ci, role: admin, tenant: b, sha256: " + strings.ToUpper(hash) + "}\n",
			"auth.tokens[2].sha256: the secret of auth.tokens[0] (ci) too: one secret would be two tokens; give each line its own token (apollo token create)"},
	} {
		c := Default()
		if err := c.parse("apollo.yaml", []byte(tc.yaml), func(string) string { return "" }); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %s", tc.yaml, err, tc.want)
		}
	}
	c := Default()
	c.Auth.Tokens = []Token{{Role: "agent", Tenant: "a", JobPrefix: "backup", RateMax: 5, SHA256: hash}, {Role: "agent", Tenant: "b", SHA256: strings.Repeat("cd", 32)}}
	if err := c.Validate(); err != nil {
		t.Errorf("agent tokens with a prefix and a rate, or neither: %v", err)
	}
}

func TestTenantNamesChecked(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct{ yaml, want string }{
		{"auth:\n  tokens:\n    - {role: admin, tenant: \"a\\nb\", sha256: " + hash + "}\n", `auth.tokens[0].tenant: "a\nb" holds a control character`},
		{"auth:\n  tokens:\n    - {role: admin, tenant: \"ops \", sha256: " + hash + "}\n", `auth.tokens[0].tenant: "ops " begins or ends with a space`},
		{"limits:\n  tenants:\n    \"x\\u001b[31m\": {tasks: 1}\n", `limits.tenants["x\x1b[31m"]: "x\x1b[31m" holds a control character`},
		{"channels:\n  c: {type: console, tenants: [\"t\\r\"]}\n", `channels.c.tenants: "t\r" holds a control character`},
		{"auth:\n  tokens:\n    - {role: admin, tenant: " + strings.Repeat("t", 129) + ", sha256: " + hash + "}\n", `auth.tokens[0].tenant: 129 bytes long: use at most 128`},
	} {
		c := Default()
		if err := c.parse("apollo.yaml", []byte(tc.yaml), func(string) string { return "" }); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %s", tc.yaml, err, tc.want)
		}
	}
	c := Default()
	c.Auth.Tokens = []Token{{Role: "admin", Tenant: "data-team · 数据", SHA256: hash}}
	if err := c.Validate(); err != nil {
		t.Errorf("a tenant of letters, digits and punctuation: %v", err)
	}
}
