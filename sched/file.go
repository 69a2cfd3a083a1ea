package sched

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo/internal/sourcefile"
)

// File is a jobs file: defaults and jobs, as written. Parse and LoadFile
// return it checked; New and Reload check it again, so a File built or
// changed in Go is held to the same rules.
type File struct {
	Defaults Defaults `yaml:"defaults"`
	Jobs     []Job    `yaml:"jobs"`

	filename string
	pos      map[string]filePos // node path ("jobs.2.schedule") -> where it is
	keys     map[lineKey]filePos
	lines    map[int]lineNodes // what is on each line, from pos and keys
	starts   []int             // line of each job's mapping, in file order, for messages without a path
}

// lineNodes is what one line of the file holds, for the messages of the
// YAML library, which give a line: kept by line, so that placing each of a
// file's problems costs a lookup, not a pass over the file (50 000 of
// them once took minutes).
type lineNodes struct {
	key  string // the mapping key written there, if only one is
	keys int    // how many are
	col  int    // the first column a node starts at; 0: none
}

// Defaults apply to every job that does not set the field itself.
type Defaults struct {
	Timezone     string      `yaml:"timezone"`
	Timeout      *Duration   `yaml:"timeout"`
	KillGrace    *Duration   `yaml:"kill_grace"`
	Retries      *int        `yaml:"retries"`
	RetryBackoff *Duration   `yaml:"retry_backoff"`
	Concurrency  Concurrency `yaml:"concurrency"`
	LateAfter    *Duration   `yaml:"late_after"`
	Catchup      Catchup     `yaml:"catchup"`
}

// Job is one entry of the jobs file. Pointer fields distinguish "not set"
// (take the default) from an explicit zero ("timeout: 0" means no timeout
// even when defaults.timeout is set).
type Job struct {
	Name         string            `yaml:"name"`
	Schedule     string            `yaml:"schedule"`
	Timezone     string            `yaml:"timezone"`
	Command      []string          `yaml:"command"`
	Shell        string            `yaml:"shell"`
	Env          map[string]string `yaml:"env"`
	Dir          string            `yaml:"dir"`
	Timeout      *Duration         `yaml:"timeout"`
	KillGrace    *Duration         `yaml:"kill_grace"`
	Retries      *int              `yaml:"retries"`
	RetryBackoff *Duration         `yaml:"retry_backoff"`
	Concurrency  Concurrency       `yaml:"concurrency"`
	After        []string          `yaml:"after"`
	LateAfter    *Duration         `yaml:"late_after"`
	Catchup      Catchup           `yaml:"catchup"`
	Paused       bool              `yaml:"paused"`
}

// Concurrency says what happens when a run is due while the job's previous
// run is still going.
type Concurrency string

const (
	ConcurrencyForbid  Concurrency = "forbid"  // skip the new run (the default)
	ConcurrencyAllow   Concurrency = "allow"   // run both
	ConcurrencyReplace Concurrency = "replace" // kill the old run, then start
)

// Catchup says what happens to schedules missed while the scheduler was down.
type Catchup string

const (
	CatchupSkip Catchup = "skip" // forget them
	CatchupOnce Catchup = "once" // run once now, for the most recent one (the default)
)

// Duration is a time.Duration written as "30s", "10m", "1h30m" or 0.
type Duration time.Duration

// Dur returns a pointer to d as a Duration, for Files built in Go.
func Dur(d time.Duration) *Duration { v := Duration(d); return &v }

// UnmarshalYAML accepts a Go duration string or a bare 0. Failures are
// returned as *yaml.TypeError so that the decoder records them and goes on,
// and the user sees every problem at once.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "0" {
			*d = 0
			return nil
		}
		if v, err := time.ParseDuration(n.Value); err == nil {
			*d = Duration(v)
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: col %d: %q is not a duration", n.Line, n.Column, n.Value)}}
}

func (d *Duration) get() time.Duration { return time.Duration(*d) }

// filePos is a place in the jobs file, 1-based.
type filePos struct{ Line, Col int }

type lineKey struct {
	line int
	key  string
}

// LoadFile reads and parses a jobs file: a regular file of at most
// sourcefile.MaxSize (16 MiB).
func LoadFile(path string) (*File, error) {
	src, err := sourcefile.Read(path, "jobs file", sourcefile.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("sched: read jobs file: %w", err)
	}
	return Parse(path, src)
}

// Thresholds returns late_after per job name, for the jobs that set one
// (directly or through defaults): a run of that job that starts later
// than this after its scheduledAt is late. It is read from the file, not
// from a running scheduler, so that a server can judge the runs it
// replays at start by it, before its scheduler starts. A file with
// problems gives none.
func (f *File) Thresholds() map[string]time.Duration {
	set, issues := f.compile()
	m := map[string]time.Duration{}
	if len(issues) > 0 {
		return m
	}
	for _, j := range set.jobs {
		if j.lateAfter > 0 {
			m[j.name] = j.lateAfter
		}
	}
	return m
}

// Parse decodes and checks a jobs file. On any problem it returns a
// *FileError with every problem found, each with its line and column.
func Parse(filename string, src []byte) (*File, error) {
	f := &File{filename: filename}
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		// The YAML library reports the line where the enclosing block
		// starts, not the line of the mistake: say so.
		is := f.yamlIssue(err.Error())
		is.Message = "YAML syntax: " + is.Message
		is.Hint = "the mistake is in the block that starts here; check indentation, quotes and brackets"
		if bad := sourcefile.BadChar(src, "a jobs file"); bad != nil && sourcefile.Refused(err.Error()) {
			// The library names no place for a character it refuses:
			// find it, since it is often invisible.
			is = &Issue{File: filename, Line: bad.Line, Col: bad.Col, Message: "YAML syntax: " + bad.Message, Hint: bad.Hint}
		}
		return nil, fileError([]*Issue{is})
	}
	f.index(&root)

	var issues []*Issue
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	err := dec.Decode(f)
	var te *yaml.TypeError
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case errors.As(err, &te):
		for _, msg := range te.Errors {
			issues = append(issues, f.yamlIssue(msg))
		}
	default:
		issues = append(issues, f.yamlIssue(err.Error()))
	}
	if err == nil {
		var extra yaml.Node
		if dec.Decode(&extra) == nil {
			issues = append(issues, &Issue{File: filename, Line: extra.Line, Col: extra.Column,
				Message: "a second YAML document", Hint: "a jobs file is one document; remove the '---' and what follows, or merge it"})
		}
	}
	// Check what was decoded too, so that one pass shows every problem; but
	// a field the decoder already rejected would only be reported again in
	// other words ("neither command nor shell" after a bad command), so the
	// checks' issues about such a field are dropped.
	seen := map[[2]string]bool{}
	for _, is := range issues {
		seen[[2]string{is.Job, is.Field}] = true
	}
	_, checked := f.compile()
	for _, is := range checked {
		if !seen[[2]string{is.Job, is.Field}] {
			issues = append(issues, is)
		}
	}
	if len(issues) > 0 {
		return nil, fileError(issues)
	}
	return f, nil
}

// index records where every node is, by path, so that checks made after
// decoding can point at the line and column of the value they reject.
func (f *File) index(root *yaml.Node) {
	f.pos = map[string]filePos{}
	f.keys = map[lineKey]filePos{}
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		f.pos[path] = filePos{n.Line, n.Column}
		if depth > 5 {
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, depth)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				f.keys[lineKey{k.Line, k.Value}] = filePos{k.Line, k.Column}
				walk(v, join(path, k.Value), depth+1)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if path == "jobs" {
					f.starts = append(f.starts, c.Line)
				}
				walk(c, join(path, strconv.Itoa(i)), depth+1)
			}
		}
	}
	walk(root, "", 0)
	f.lines = map[int]lineNodes{}
	for k := range f.keys {
		ln := f.lines[k.line]
		ln.key, ln.keys = k.key, ln.keys+1
		f.lines[k.line] = ln
	}
	for _, p := range f.pos {
		if ln := f.lines[p.Line]; ln.col == 0 || p.Col < ln.col {
			ln.col = p.Col
			f.lines[p.Line] = ln
		}
	}
}

func join(path, elem string) string {
	if path == "" {
		return elem
	}
	return path + "." + elem
}

// where returns the position of the first path that names a node, so that
// an issue about a missing field points at its job instead.
func (f *File) where(paths ...string) filePos {
	if f.pos == nil {
		return filePos{}
	}
	for _, p := range paths {
		if pos, ok := f.pos[p]; ok && pos.Line > 0 {
			return pos
		}
	}
	return filePos{1, 1}
}

var (
	yamlLineRe   = regexp.MustCompile(`^(?:yaml: )?line (\d+): (?:col (\d+): )?(.*)$`)
	unknownRe    = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	cannotRe     = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
	yamlTypeName = map[string]string{
		"int": "a whole number", "bool": "true or false", "string": "a string",
		"[]string": "a list of strings", "map[string]string": "a mapping of names to strings",
		"sched.Job": "a job (a mapping)", "[]sched.Job": "a list of jobs", "sched.Defaults": "a mapping",
		"sched.Concurrency": "forbid, allow or replace", "sched.Catchup": "skip or once",
	}
)

// yamlIssue turns one of the YAML library's messages into an Issue with a
// line and column and plain words.
func (f *File) yamlIssue(msg string) *Issue {
	is := &Issue{File: f.filename, Line: 1, Col: 1, Message: strings.TrimPrefix(msg, "yaml: ")}
	m := yamlLineRe.FindStringSubmatch(msg)
	if m == nil {
		return is
	}
	is.Line, _ = strconv.Atoi(m[1])
	is.Col, _ = strconv.Atoi(m[2])
	is.Message = m[3]
	is.Job = f.jobAt(is.Line)
	if u := unknownRe.FindStringSubmatch(m[3]); u != nil {
		is.Field = u[1]
		is.Message = "unknown field"
		is.Hint = "known fields are " + knownFields(u[2])
		if p, ok := f.keys[lineKey{is.Line, u[1]}]; ok {
			is.Col = p.Col
		}
	} else if c := cannotRe.FindStringSubmatch(m[3]); c != nil {
		want := yamlTypeName[c[3]]
		if want == "" {
			want = c[3]
		}
		is.Message = fmt.Sprintf("cannot use %q here: expected %s", c[2], want)
		is.Field = f.keyOnLine(is.Line)
	} else if strings.HasSuffix(m[3], "is not a duration") {
		is.Field = f.keyOnLine(is.Line)
		is.Hint = "write a number with a unit, like 30s, 10m or 1h30m, or 0"
	}
	if is.Col == 0 {
		is.Col = f.firstCol(is.Line)
	}
	return is
}

// jobAt names the job whose mapping contains line, when it has a name.
func (f *File) jobAt(line int) string {
	idx := sort.SearchInts(f.starts, line+1) - 1 // the last job starting at or before line
	if idx < 0 || idx >= len(f.Jobs) {
		return ""
	}
	return f.Jobs[idx].Name
}

// keyOnLine returns the mapping key written on line, when there is exactly
// one: the field a value error on that line is about.
func (f *File) keyOnLine(line int) string {
	if ln := f.lines[line]; ln.keys == 1 {
		return ln.key
	}
	return ""
}

func (f *File) firstCol(line int) int {
	return max(f.lines[line].col, 1)
}

func knownFields(typ string) string {
	switch typ {
	case "sched.Job":
		return "name, schedule, timezone, command, shell, env, dir, timeout, kill_grace, retries, retry_backoff, concurrency, after, late_after, catchup, paused"
	case "sched.Defaults":
		return "timezone, timeout, kill_grace, retries, retry_backoff, concurrency, late_after, catchup"
	default:
		return "defaults, jobs"
	}
}
