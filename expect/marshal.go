package expect

import (
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Writing a set back in the file form (Parse reads it; file.go).

// fileExpectation is one expectation as Marshal writes it: every value
// that is set, durations in Go's notation.
type fileExpectation struct {
	Job        string        `yaml:"job"`
	Schedule   string        `yaml:"schedule,omitempty"`
	Timezone   string        `yaml:"timezone,omitempty"`
	Every      string        `yaml:"every,omitempty"`
	Grace      string        `yaml:"grace,omitempty"`
	MaxRuntime string        `yaml:"max_runtime,omitempty"`
	MinRuntime string        `yaml:"min_runtime,omitempty"`
	MaxRuns    int           `yaml:"max_runs,omitempty"`
	RunsWindow string        `yaml:"runs_window,omitempty"`
	Upstream   []string      `yaml:"upstream,omitempty,flow"`
	Flapping   *fileFlapping `yaml:"flapping,omitempty,flow"`
}

type fileFlapping struct {
	Changes int    `yaml:"changes"`
	Window  string `yaml:"window,omitempty"`
	Hold    string `yaml:"hold,omitempty"`
}

// Marshal writes the set in the file form, each expectation with every
// value it has (defaults are not factored out): Parse reads it back into
// an equal set.
func (s *Set) Marshal() []byte {
	list := make([]fileExpectation, len(s.specs))
	for k, sp := range s.specs {
		e := sp.Expectation
		fe := fileExpectation{Job: e.Job, Schedule: e.Schedule, Timezone: e.Timezone, Every: formatDuration(e.Every),
			Grace: formatDuration(e.Grace), MaxRuntime: formatDuration(e.MaxRuntime), MinRuntime: formatDuration(e.MinRuntime),
			MaxRuns: e.MaxRuns, RunsWindow: formatDuration(e.RunsWindow), Upstream: e.Upstream}
		if e.Grace == 0 && (e.Schedule != "" || e.Every != 0) {
			fe.Grace = "0s" // unwritten, it would read back as DefaultGrace
		}
		if f := e.Flapping; f.Changes != 0 {
			fe.Flapping = &fileFlapping{Changes: f.Changes, Window: formatDuration(f.Window), Hold: formatDuration(f.Hold)}
		}
		list[k] = fe
	}
	out, err := yaml.Marshal(struct {
		Expectations []fileExpectation `yaml:"expectations"`
	}{list})
	if err != nil {
		// Strings, numbers and lists of strings always encode.
		panic("expect: marshal: " + err.Error())
	}
	return out
}

// formatDuration writes d the short way ("1h", "1h30m", "1m30s"), or ""
// for zero, which Marshal leaves out: Go's form without the zero minutes
// and seconds of whole hours and minutes.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	s := d.String()
	if d%time.Minute == 0 {
		s = strings.TrimSuffix(s, "0s")
	}
	if d%time.Hour == 0 {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
