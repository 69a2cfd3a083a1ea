package sched

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timezones must resolve on hosts without a zoneinfo database

	"github.com/apollo-11/apollo/expect"
)

// Built-in values for fields that neither a job nor the defaults set.
const (
	defaultKillGrace    = 10 * time.Second
	defaultRetryBackoff = 30 * time.Second
	maxRetryBackoff     = time.Hour
	maxRetries          = 100
	maxNameBytes        = 200 // leaves room in a 256-byte task ID for "@<time>#<attempt>"
	// maxSpan bounds every duration of a job, and a run's deadline
	// (timeout + kill_grace), which its events carry as timeoutMs: the
	// server refuses a duration over 366 days, and the job's expectation
	// adds a second to the deadline.
	maxSpan = 365 * 24 * time.Hour
)

// job is a checked job with every default applied: what the scheduler runs.
type job struct {
	name      string
	sched     *expect.Schedule // nil for a downstream job
	loc       *time.Location
	argv      []string
	env       []string // KEY=value, added to the scheduler's environment
	dir       string
	timeout   time.Duration
	killGrace time.Duration
	retries   int
	backoff   time.Duration
	policy    Concurrency
	after     []string
	below     []string // jobs that list this one in their after
	lateAfter time.Duration
	catchup   Catchup
	paused    bool
	spec      string // a digest of the settings, to tell what a reload changed
}

// jobSet is a checked jobs file.
type jobSet struct {
	jobs   []*job
	byName map[string]*job
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// checker collects issues with positions while a File is compiled.
type checker struct {
	f      *File
	issues []*Issue
}

func (c *checker) add(job string, idx int, field, hint, format string, args ...any) {
	var pos filePos
	if idx < 0 {
		pos = c.f.where("defaults."+field, "defaults")
	} else {
		base := "jobs." + strconv.Itoa(idx)
		pos = c.f.where(base+"."+field, base)
	}
	c.issues = append(c.issues, &Issue{File: c.f.filename, Line: pos.Line, Col: pos.Col, Job: job, Field: field,
		Message: fmt.Sprintf(format, args...), Hint: hint})
}

// compile checks the file and applies defaults. It returns every issue.
func (f *File) compile() (*jobSet, []*Issue) {
	c := &checker{f: f}
	d := f.Defaults
	defLoc := c.location("", -1, d.Timezone)
	c.policies("", -1, d.Concurrency, d.Catchup)
	c.durations("", -1, map[string]*Duration{"timeout": d.Timeout, "kill_grace": d.KillGrace, "retry_backoff": d.RetryBackoff, "late_after": d.LateAfter})
	c.retries("", -1, d.Retries)

	set := &jobSet{byName: map[string]*job{}}
	firstAt := map[string]int{}
	for i := range f.Jobs {
		j := c.job(i, defLoc)
		if j.name == "" {
			continue
		}
		if prev, dup := firstAt[j.name]; dup {
			c.add(j.name, i, "name", "give every job its own name", "name already used by the job at line %d", f.where("jobs."+strconv.Itoa(prev)).Line)
			continue
		}
		firstAt[j.name] = i
		set.jobs = append(set.jobs, j)
		set.byName[j.name] = j
	}
	c.graph(set, firstAt)
	return set, c.issues
}

// job checks one job and returns it with defaults applied.
func (c *checker) job(i int, defLoc *time.Location) *job {
	s, d := c.f.Jobs[i], c.f.Defaults
	name := s.Name
	switch {
	case name == "":
		c.add("", i, "name", "every job needs a unique name, like name: nightly_backup", "missing")
	case len(name) > maxNameBytes || !nameRe.MatchString(name):
		c.add("", i, "name", "use letters, digits and _ . : - (up to 200 bytes), starting with a letter or digit", "%q is not a usable job name", name)
		name = ""
	}
	j := &job{name: name, after: s.After, dir: s.Dir, paused: s.Paused}
	j.loc = defLoc
	if s.Timezone != "" {
		j.loc = c.location(name, i, s.Timezone)
	}
	c.schedule(j, i, s)
	c.command(j, i, s)
	c.durations(name, i, map[string]*Duration{"timeout": s.Timeout, "kill_grace": s.KillGrace, "retry_backoff": s.RetryBackoff, "late_after": s.LateAfter})
	c.retries(name, i, s.Retries)
	c.policies(name, i, s.Concurrency, s.Catchup)
	j.timeout = pick(s.Timeout, d.Timeout, 0)
	j.killGrace = pick(s.KillGrace, d.KillGrace, defaultKillGrace)
	j.backoff = pick(s.RetryBackoff, d.RetryBackoff, defaultRetryBackoff)
	j.lateAfter = pick(s.LateAfter, d.LateAfter, 0)
	j.retries = pickInt(s.Retries, d.Retries)
	if sum := j.timeout + j.killGrace; j.timeout <= maxSpan && j.killGrace <= maxSpan && j.timeout > 0 && sum > maxSpan {
		c.add(name, i, "timeout", "shorten timeout or kill_grace: the server refuses a run's deadline that long",
			"timeout plus kill_grace is %v, over 365 days", sum)
	}
	j.policy = Concurrency(first(string(s.Concurrency), string(d.Concurrency), string(ConcurrencyForbid)))
	j.catchup = Catchup(first(string(s.Catchup), string(d.Catchup), string(CatchupOnce)))
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := s.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			c.add(name, i, "env", "names are non-empty without '='; no NUL bytes", "bad variable %q", k)
			continue
		}
		j.env = append(j.env, k+"="+v)
	}
	j.spec = fmt.Sprintf("%s|%v|%q|%q|%q|%v|%v|%v|%d|%v|%s|%q|%v|%s|%v", j.sched, j.loc, j.argv, j.env, j.dir,
		j.timeout, j.killGrace, j.backoff, j.retries, j.lateAfter, j.policy, j.after, j.catchup, name, j.paused)
	return j
}

func (c *checker) schedule(j *job, i int, s Job) {
	switch {
	case s.Schedule != "" && len(s.After) > 0:
		c.add(j.name, i, "schedule", "remove schedule to run after the upstream jobs, or remove after", "a job runs on a schedule or after other jobs, not both")
	case s.Schedule == "" && len(s.After) == 0:
		c.add(j.name, i, "schedule", `add schedule: "0 * * * *" (or @every 10m), or after: [an_upstream_job]`, "no schedule and no after: the job would never run")
	case s.Schedule != "":
		sc, err := expect.ParseSchedule(s.Schedule, j.loc)
		if err != nil {
			c.add(j.name, i, "schedule", "see docs/scheduler.md for the forms a schedule takes", "%v", err)
			return
		}
		if d := sc.Every(); d > maxSpan {
			// Not a duration of the job, but held to the same bound: a
			// longer interval's next run may fall after 2200-01-01, the
			// latest time the server takes ("@every 9223372036854775807ns"
			// ran next in 2262), and so may the run after a run.
			c.add(j.name, i, "schedule", "write at most @every 8760h; for a run once a year, write @yearly or a cron expression",
				"%q: an interval of %v is longer than 365 days, the longest an @every may be", s.Schedule, d)
			return
		}
		j.sched = sc
	}
}

func (c *checker) command(j *job, i int, s Job) {
	switch {
	case len(s.Command) > 0 && s.Shell != "":
		c.add(j.name, i, "command", "keep command (an argv list) or shell (a /bin/sh -c line), not both", "both command and shell are set")
	case len(s.Command) == 0 && s.Shell == "":
		c.add(j.name, i, "command", `add command: ["/path/to/program", "arg"] or shell: "a | pipeline"`, "neither command nor shell is set")
	case s.Shell != "":
		j.argv = []string{"/bin/sh", "-c", s.Shell}
	case s.Command[0] == "":
		c.add(j.name, i, "command", "the first element is the program to run", "the program name is empty")
	default:
		j.argv = slices.Clone(s.Command)
	}
}

func (c *checker) location(name string, i int, tz string) *time.Location {
	if tz == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		c.add(name, i, "timezone", "use an IANA name like Europe/Berlin, Asia/Shanghai or UTC", "unknown timezone %q", tz)
		return time.UTC
	}
	return loc
}

func (c *checker) durations(name string, i int, ds map[string]*Duration) {
	for _, field := range []string{"timeout", "kill_grace", "retry_backoff", "late_after"} {
		switch d := ds[field]; {
		case d == nil:
		case *d < 0:
			c.add(name, i, field, "use 0 or a positive duration", "negative (%v)", d.get())
		case d.get() > maxSpan:
			c.add(name, i, field, fmt.Sprintf("use at most %v (365 days)", maxSpan), "%v is too long", d.get())
		}
	}
}

func (c *checker) retries(name string, i int, n *int) {
	if n != nil && (*n < 0 || *n > maxRetries) {
		c.add(name, i, "retries", "use a number from 0 to 100", "%d is out of range", *n)
	}
}

func (c *checker) policies(name string, i int, conc Concurrency, cu Catchup) {
	switch conc {
	case "", ConcurrencyForbid, ConcurrencyAllow, ConcurrencyReplace:
	default:
		c.add(name, i, "concurrency", "use forbid, allow or replace", "unknown value %q", conc)
	}
	switch cu {
	case "", CatchupSkip, CatchupOnce:
	default:
		c.add(name, i, "catchup", "use skip or once", "unknown value %q", cu)
	}
}

// graph checks every after list and looks for cycles, and records each
// job's downstream jobs. A cycle reads "a -> b -> a": a runs after b.
func (c *checker) graph(set *jobSet, idx map[string]int) {
	for _, j := range set.jobs {
		i := idx[j.name]
		seen := map[string]bool{}
		for k, up := range j.after {
			field := "after." + strconv.Itoa(k)
			switch u, ok := set.byName[up]; {
			case up == j.name:
				c.add(j.name, i, field, "remove it from after", "a job cannot run after itself")
			case !ok:
				c.add(j.name, i, field, "name a job defined in this file", "unknown upstream %q", up)
			case seen[up]:
				c.add(j.name, i, field, "list each upstream once", "%q is listed twice", up)
			default:
				u.below = append(u.below, j.name)
			}
			seen[up] = true
		}
	}
	names := make([]string, len(set.jobs))
	for i, j := range set.jobs {
		names[i] = j.name
	}
	after := func(name string) []string { return set.byName[name].after }
	for _, cycle := range expect.Cycles(names, after) {
		c.add(cycle[0], idx[cycle[0]], "after", "remove one of these after entries", "dependency cycle: %s", strings.Join(cycle, " -> "))
	}
}

func pick(v, def *Duration, builtin time.Duration) time.Duration {
	switch {
	case v != nil:
		return v.get()
	case def != nil:
		return def.get()
	}
	return builtin
}

func pickInt(v, def *int) int {
	switch {
	case v != nil:
		return *v
	case def != nil:
		return *def
	}
	return 0
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
