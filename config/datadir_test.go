package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// A rules, expectations or jobs file among the server's own files in the
// data directory is refused at load, with what to change; one beside them
// is fine.
func TestFilesAmongTheDataDirectorysOwn(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	for _, tc := range []struct {
		name  string
		set   func(c *Config, p string)
		path  string
		want  string // "" accepted
		where string
	}{
		{"rules as the tenants' directory", func(c *Config, p string) { c.Rules = p }, "rules", "rules: " + filepath.Join(data, "rules") + " is where the server keeps its own rules", "rules.txt"},
		{"rules as the old one file", func(c *Config, p string) { c.Rules = p }, "rules.json", "its own rules.json", "rules.txt"},
		{"rules in the tenants' directory", func(c *Config, p string) { c.Rules = p }, "rules/mine.txt", "its own rules", "rules.txt"},
		{"rules relative", func(c *Config, p string) { c.Rules = p }, "./x/../rules/", "its own rules", "rules.txt"},
		{"expectations", func(c *Config, p string) { c.Expectations = p }, "expectations", "expectations: ", "expectations.yaml"},
		{"jobs in the scheduler's state", func(c *Config, p string) { c.Jobs = p }, "sched/jobs.yaml", "jobs: ", "jobs.yaml"},
		{"rules as the data directory", func(c *Config, p string) { c.Rules = p }, ".", "is the data directory", "rules.txt"},
		{"rules beside", func(c *Config, p string) { c.Rules = p }, "rules.txt", "", ""},
		{"rules named like one", func(c *Config, p string) { c.Rules = p }, "rules2", "", ""},
		{"expectations beside", func(c *Config, p string) { c.Expectations = p }, "demo-expectations.yaml", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Data = data
			p := filepath.Join(data, tc.path)
			if strings.HasPrefix(tc.path, "./") {
				// A relative path is the working directory's, as data: is.
				rel, err := filepath.Rel(mustWd(t), data)
				if err != nil {
					t.Fatal(err)
				}
				p = filepath.Join(rel, "x", "..", "rules") + "/"
			}
			tc.set(&c, p)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("Validate = nil, want %q", tc.want)
			case !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(data, tc.where)):
				t.Fatalf("Validate = %v, want %q and the place %s", err, tc.want, filepath.Join(data, tc.where))
			}
		})
	}
}

func mustWd(t *testing.T) string {
	t.Helper()
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
