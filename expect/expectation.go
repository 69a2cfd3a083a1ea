package expect

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timezones must resolve on hosts without a zoneinfo database
	"unicode"
	"unicode/utf8"

	apollo "github.com/apollo-11/apollo"
)

// Expectation is what is expected of one job (every run that reports the
// name Job, in one tenant). Every field but Job is optional; a zero value
// means "not expected": no Schedule and no Every, no missed runs; no
// MaxRuntime, no run is too long; and so on.
type Expectation struct {
	Job string

	// Schedule is a cron expression (5 fields, 6 with seconds first, an
	// @-descriptor or @every) read on the wall clock of Timezone (UTC when
	// empty): a run is expected at each tick. Every is the other way to
	// expect runs: one within Every of the start of the one before.
	// Schedule and Every exclude each other.
	Schedule string
	Timezone string
	Every    time.Duration

	// Grace is how late after its expected time a run may start before the
	// run counts as missed (and how early it may start and still count).
	Grace time.Duration

	// MaxRuntime: a run still running this long after its start is too
	// long; the caller times it out. MinRuntime: a successful run that
	// took less is too short.
	MaxRuntime time.Duration
	MinRuntime time.Duration

	// MaxRuns: a run that starts when MaxRuns runs already started within
	// RunsWindow before it is too often.
	MaxRuns    int
	RunsWindow time.Duration

	// Upstream names the jobs this one depends on: while one of them (or
	// one above them) is failing, missed or timing out, the alerts of this
	// job are its echoes and are held.
	Upstream []string

	// Flapping, when Changes is set, watches the job for runs that keep
	// switching between success and failure.
	Flapping Flapping
}

// Flapping says when a job flaps: when its runs switch between success
// and failure (failed or timeout) Changes times within Window (0: an
// hour). It is stable again once Hold (0: Window) passes without a switch.
type Flapping struct {
	Changes int
	Window  time.Duration
	Hold    time.Duration
}

// Defaults and limits. The limits keep the memory of one expectation small
// and its arithmetic far from overflow.
const (
	// DefaultGrace is the grace of a file's expectation that has a schedule
	// or a period and sets no grace, itself or in defaults.
	DefaultGrace = 5 * time.Minute
	// DefaultFlapWindow is the window of a Flapping that sets none.
	DefaultFlapWindow = time.Hour

	maxSpan        = 366 * 24 * time.Hour
	maxRuns        = 1000
	maxFlapChanges = 100
	maxUpstream    = 64
)

// spec is a checked expectation with its schedule compiled.
type spec struct {
	Expectation
	sched *Schedule // nil without Schedule
	at    int       // its index in what was checked: where a second one for the job points
}

// Set is a checked set of expectations of one tenant: one per job, no
// dependency cycles. It is immutable.
type Set struct {
	specs []*spec
	byJob map[string]*spec
	// watched are the jobs whose alerts can be held: those with an
	// upstream, and those watched for flapping; causes, the jobs some
	// other job names as upstream.
	watched []string
	causes  map[string]bool
}

// NewSet checks expectations built in Go (by the API, or from a scheduler's
// jobs) and returns them as a Set. Values are taken as they are: no
// defaults apply. On any problem it returns a *FileError with every
// problem, each naming its job and field.
func NewSet(exps []Expectation) (*Set, error) {
	c := &checker{}
	set := c.set(exps)
	if len(c.issues) > 0 {
		return nil, NewFileError("expectations", c.issues)
	}
	return set, nil
}

// Len is the number of expectations.
func (s *Set) Len() int { return len(s.specs) }

// Expectations returns a copy of the expectations, in the order given.
func (s *Set) Expectations() []Expectation {
	out := make([]Expectation, len(s.specs))
	for i, sp := range s.specs {
		out[i] = sp.Expectation
		out[i].Upstream = slices.Clone(sp.Upstream)
	}
	return out
}

// Watched are the jobs whose alerts can be held (an upstream that is
// down, or their own flapping): those with an upstream and those watched
// for flapping, in the order given. Do not modify it.
func (s *Set) Watched() []string { return s.watched }

// IsUpstream reports whether another job names job as its upstream: a
// change in job's health can hold or release other jobs' alerts.
func (s *Set) IsUpstream(job string) bool { return s.causes[job] }

// Lookup returns the expectation of job.
func (s *Set) Lookup(job string) (Expectation, bool) {
	sp, ok := s.byJob[job]
	if !ok {
		return Expectation{}, false
	}
	e := sp.Expectation
	e.Upstream = slices.Clone(sp.Upstream)
	return e, true
}

// upstream returns job's declared upstream jobs; a job without an
// expectation has none.
func (s *Set) upstream(job string) []string {
	if sp := s.byJob[job]; sp != nil {
		return sp.Upstream
	}
	return nil
}

// checker collects issues with positions while expectations are checked.
// where finds the position of an expectation's field (index -1: the
// defaults); without a file it is nil and issues have no position.
//
// A field gets one issue: the first. A value the file decoder could not
// read is reported there, and the checks that would then see the field
// as not given (grace without a schedule, after a schedule that is not a
// string) are skipped through broken.
type checker struct {
	ctx    context.Context // nil: never done
	file   string
	where  func(i int, field string) filePos
	issues []*Issue
	// reported are the fields with an issue, by expectation: broken asks
	// it for every expectation, so it must not look through the others'
	// (one map of every issue made a file of 140 000 broken entries take
	// nine minutes to check).
	reported map[int][]string
	// Many jobs share a zone and a schedule: each is loaded and parsed
	// once per set (a zone costs a read of the zone database, a schedule
	// tens of microseconds), and jobs share the *Schedule.
	zones     map[string]*time.Location
	schedules map[[2]string]*Schedule
}

// filePos is a place in a file, 1-based.
type filePos struct{ Line, Col int }

func (c *checker) add(i int, job, field, hint, format string, args ...any) {
	if c.reported == nil {
		c.reported = map[int][]string{}
	}
	if slices.Contains(c.reported[i], field) {
		return
	}
	c.reported[i] = append(c.reported[i], field)
	is := &Issue{File: c.file, Job: job, Field: field, Message: fmt.Sprintf(format, args...), Hint: hint}
	if c.where != nil {
		p := c.where(i, field)
		is.Line, is.Col = p.Line, p.Col
	}
	c.issues = append(c.issues, is)
}

// broken reports whether a field of expectation i, or a field inside it
// ("flapping" covers "flapping.changes"), already has an issue.
func (c *checker) broken(i int, fields ...string) bool {
	for _, r := range c.reported[i] {
		for _, f := range fields {
			if r == f || strings.HasPrefix(r, f+".") {
				return true
			}
		}
	}
	return false
}

// set checks every expectation and the set as a whole.
func (c *checker) set(exps []Expectation) *Set {
	set := &Set{byJob: make(map[string]*spec, len(exps))}
	for i := range exps {
		if i%checkEvery == 0 && c.ctx != nil && c.ctx.Err() != nil {
			return set
		}
		sp := c.one(i, exps[i])
		if sp == nil {
			continue
		}
		if prev := set.byJob[sp.Job]; prev != nil {
			hint := "give each job one expectation"
			if c.where != nil {
				hint = fmt.Sprintf("the first is at line %d; keep one", c.where(prev.at, "job").Line)
			}
			c.add(i, sp.Job, "job", hint, "a second expectation for this job")
			continue
		}
		set.specs = append(set.specs, sp)
		set.byJob[sp.Job] = sp
		if len(sp.Upstream) > 0 || sp.Flapping.Changes > 0 {
			set.watched = append(set.watched, sp.Job)
		}
		for _, up := range sp.Upstream {
			if set.causes == nil {
				set.causes = map[string]bool{}
			}
			set.causes[up] = true
		}
	}
	if set.causes == nil {
		return set // no upstream, no cycle: the walk would cost two maps of every job
	}
	names := make([]string, len(set.specs))
	for i, sp := range set.specs {
		names[i] = sp.Job
	}
	for _, cycle := range Cycles(names, set.upstream) {
		c.add(set.byJob[cycle[0]].at, cycle[0], "upstream", "remove one of these upstream entries: alerts would hold each other forever",
			"dependency cycle: %s", strings.Join(cycle, " -> "))
	}
	return set
}

// one checks one expectation and compiles it; nil when it has no usable
// job name (its other problems are still reported).
func (c *checker) one(i int, e Expectation) *spec {
	if slices.Contains(c.reported[i], "") { // not an expectation at all
		return nil
	}
	job := e.Job
	if msg, hint := checkName(job); msg != "" {
		c.add(i, "", "job", hint, "%s", msg)
		job = ""
	}
	sp := &spec{Expectation: e}
	sp.Upstream = slices.Clone(e.Upstream)
	c.durations(i, job, &e)
	c.flapping(i, job, e.Flapping)
	timed := e.Schedule != "" || e.Every != 0 || c.broken(i, "schedule", "every")
	switch {
	case e.Schedule != "" && e.Every != 0:
		c.add(i, job, "every", "keep schedule (runs at fixed times) or every (a run within every of the last), not both", "both schedule and every are set")
	case e.Schedule != "":
		sp.sched = c.schedule(i, job, e.Schedule, c.location(i, job, e.Timezone))
	case e.Timezone != "" && !c.broken(i, "schedule"):
		c.add(i, job, "timezone", "a timezone is how a schedule is read; remove it, or add a schedule", "timezone without a schedule")
	}
	if e.Grace != 0 && !timed {
		c.add(i, job, "grace", "grace is how late a run may start: add a schedule or every, or remove grace", "grace without a schedule or every")
	}
	if e.MinRuntime > 0 && e.MaxRuntime > 0 && e.MinRuntime >= e.MaxRuntime {
		c.add(i, job, "min_runtime", "min_runtime must be below max_runtime", "%v is not below max_runtime %v", e.MinRuntime, e.MaxRuntime)
	}
	switch {
	case e.MaxRuns < 0 || e.MaxRuns > maxRuns:
		c.add(i, job, "max_runs", fmt.Sprintf("use a number from 1 to %d, or 0 for no limit", maxRuns), "%d is out of range", e.MaxRuns)
	case e.MaxRuns > 0 && e.RunsWindow == 0 && !c.broken(i, "runs_window"):
		c.add(i, job, "max_runs", "add runs_window: the span max_runs counts over, like 1h", "max_runs without runs_window")
	case e.MaxRuns == 0 && e.RunsWindow != 0 && !c.broken(i, "max_runs"):
		c.add(i, job, "runs_window", "add max_runs, or remove runs_window", "runs_window without max_runs")
	}
	c.upstream(i, job, e.Upstream)
	if job == "" {
		return nil
	}
	sp.at = i
	return sp
}

// CheckJob returns an *apollo.Error (EINVALID, field "job") when no
// expectation can name job. Events take any UTF-8 name, an expectation's
// job only one without control characters, so a job can run that the
// learner must not propose for.
func CheckJob(job string) error {
	if !unnameable(job) {
		return nil
	}
	msg, _ := checkName(job)
	return &apollo.Error{Code: apollo.EINVALID, Field: "job", Message: msg + ": no expectation can name this job",
		Hint: fmt.Sprintf("an expectation's job is UTF-8 of up to %d bytes without control characters (docs/expectations.md); to watch the job, have its runs report such a name", apollo.MaxNameBytes)}
}

// unnameable reports whether no expectation can name job; checkName
// says why. It allocates nothing: the learner asks it of every run.
func unnameable(job string) bool {
	return job == "" || len(job) > apollo.MaxNameBytes || !utf8.ValidString(job) || strings.ContainsFunc(job, unicode.IsControl)
}

// checkName returns what is wrong with a job name, and a hint.
func checkName(job string) (msg, hint string) {
	switch {
	case !unnameable(job):
		return "", ""
	case job == "":
		return "missing", "every expectation names its job, like job: nightly_backup"
	case len(job) > apollo.MaxNameBytes:
		return fmt.Sprintf("%d bytes, over the limit of %d", len(job), apollo.MaxNameBytes), "use the name the job's runs report"
	default:
		return fmt.Sprintf("%q holds control characters or invalid UTF-8", job), "use the name the job's runs report"
	}
}

func (c *checker) location(i int, job, tz string) *time.Location {
	if tz == "" {
		return time.UTC
	}
	if loc := c.zones[tz]; loc != nil {
		return loc
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		c.add(i, job, "timezone", "use an IANA name like Europe/Berlin, Asia/Shanghai or UTC", "unknown timezone %s", quoteShort(tz))
		return time.UTC
	}
	if c.zones == nil {
		c.zones = map[string]*time.Location{}
	}
	c.zones[tz] = loc
	return loc
}

func (c *checker) schedule(i int, job, expr string, loc *time.Location) *Schedule {
	k := [2]string{expr, loc.String()}
	if s := c.schedules[k]; s != nil {
		return s
	}
	s, err := ParseSchedule(expr, loc)
	if err != nil {
		c.add(i, job, "schedule", "see docs/expectations.md for the forms a schedule takes", "%v", err)
		return nil
	}
	if c.schedules == nil {
		c.schedules = map[[2]string]*Schedule{}
	}
	c.schedules[k] = s
	return s
}

// durations checks that each duration is in range. Every is also checked
// for its lower bound: a period under a second is a mistake.
func (c *checker) durations(i int, job string, e *Expectation) {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"every", e.Every}, {"grace", e.Grace}, {"max_runtime", e.MaxRuntime}, {"min_runtime", e.MinRuntime}, {"runs_window", e.RunsWindow}} {
		c.duration(i, job, f.name, f.d)
	}
	if e.Every > 0 && e.Every < time.Second {
		c.add(i, job, "every", "use at least 1s", "%v is too short", e.Every)
	}
}

func (c *checker) duration(i int, job, field string, d time.Duration) {
	switch {
	case d < 0:
		c.add(i, job, field, "use 0 or a positive duration", "negative (%v)", d)
	case d > maxSpan:
		c.add(i, job, field, fmt.Sprintf("use at most %v (366 days)", maxSpan), "%v is too long", d)
	}
}

func (c *checker) flapping(i int, job string, f Flapping) {
	switch {
	case f == Flapping{}:
		return
	case f.Changes == 0:
		c.add(i, job, "flapping.changes", "say how many switches between success and failure make a job flap, like changes: 4", "missing")
	case f.Changes < 2 || f.Changes > maxFlapChanges:
		c.add(i, job, "flapping.changes", fmt.Sprintf("use a number from 2 to %d", maxFlapChanges), "%d is out of range", f.Changes)
	}
	c.duration(i, job, "flapping.window", f.Window)
	c.duration(i, job, "flapping.hold", f.Hold)
}

func (c *checker) upstream(i int, job string, ups []string) {
	if len(ups) > maxUpstream {
		c.add(i, job, "upstream", fmt.Sprintf("at most %d", maxUpstream), "%d jobs listed", len(ups))
		return
	}
	for k, up := range ups {
		field := "upstream." + strconv.Itoa(k)
		if msg, hint := checkName(up); msg != "" {
			c.add(i, job, field, hint, "%s", msg)
			continue
		}
		switch {
		case up == job:
			c.add(i, job, field, "remove it from upstream", "a job cannot depend on itself")
		case slices.Contains(ups[:k], up):
			c.add(i, job, field, "list each upstream job once", "%q is listed twice", up)
		}
	}
}
