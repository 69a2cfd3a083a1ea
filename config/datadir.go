package config

import (
	"path/filepath"
	"strings"
)

// DataNames are the files and directories the server and the bus keep in
// the data directory (data:): each tenant's rules and expectations saved
// through the API in rules/ and expectations/ (a file a tenant,
// alert.FileRules), the files of the releases before those (rules.json,
// expectations.json), the log, the archive, the audit log, the
// scheduler's state, the alerts, the owed notifications and the bus's
// writer ID (docs/operations.md, "Backup and restore", lists them).
var DataNames = []string{
	"rules", "rules.json", "expectations", "expectations.json",
	"wal", "archive", "audit", "sched", "alerts.json", "alerts.live.json", "outbox.jsonl",
	"metrics-writer",
}

// checkDataFiles refuses a file of the configuration (rules:,
// expectations:, jobs:) that is the data directory, or one of its
// DataNames, or lies in one of them: the server would take the file for
// its own (rules: DATA/rules is the directory of the tenants' rules, and
// the start failed with "not a directory"; DATA/rules.json was read as
// the one file of a release before, moved and removed), or put its own
// files where the file is.
func (c *Config) checkDataFiles(bad func(key, format string, args ...any)) {
	if c.Data == "" {
		return
	}
	data, err := filepath.Abs(c.Data)
	if err != nil {
		return
	}
	for _, f := range []struct{ key, path string }{{"rules", c.Rules}, {"expectations", c.Expectations}, {"jobs", c.Jobs}} {
		if f.path == "" {
			continue
		}
		p, err := filepath.Abs(f.path)
		if err != nil {
			continue
		}
		if p == data {
			bad(f.key, "%s is the data directory (data:): name a file outside of it, e.g. %s", f.path, beside(data, f.key))
			continue
		}
		for _, name := range DataNames {
			own := filepath.Join(data, name)
			if p == own || strings.HasPrefix(p, own+string(filepath.Separator)) {
				bad(f.key, "%s is where the server keeps its own %s in the data directory (data: %s): move the file out of %s, e.g. to %s, and name that",
					f.path, name, c.Data, own, beside(data, f.key))
				break
			}
		}
	}
}

// beside is a file in the data directory that no DataNames is: where a
// file of the configuration may be.
func beside(data, key string) string {
	ext := ".txt"
	if key != "rules" {
		ext = ".yaml"
	}
	return filepath.Join(data, key+ext)
}
