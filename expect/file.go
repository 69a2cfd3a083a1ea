package expect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/apollo-11/apollo/internal/sourcefile"
)

// The keys of the file, in the order Marshal writes them.
var (
	topFields      = []string{"defaults", "expectations"}
	expFields      = []string{"job", "schedule", "timezone", "every", "grace", "max_runtime", "min_runtime", "max_runs", "runs_window", "upstream", "flapping"}
	defaultsFields = []string{"timezone", "grace", "max_runtime", "min_runtime", "flapping"}
	flappingFields = []string{"changes", "window", "hold"}
)

// Parse reads an expectations file (docs/expectations.md): an optional
// defaults block and a list of expectations, one per job.
//
//	defaults:
//	  timezone: Europe/Berlin
//	expectations:
//	  - job: nightly_backup
//	    schedule: "30 2 * * *"
//	    max_runtime: 1h
//
// Defaults fill the fields an expectation does not set; an expectation
// with a schedule or every and no grace gets DefaultGrace. On any problem
// Parse returns a *FileError with every problem found, each with its line
// and column, job and field.
//
// The file is read node by node rather than decoded into structs, so that
// every problem, an unknown key included, points at its own line and
// column.
func Parse(filename string, src []byte) (*Set, error) {
	return ParseContext(context.Background(), filename, src)
}

// ParseContext is Parse that gives up, with ctx's error, once ctx is
// done: a client that hung up does not keep a core busy with the check
// of a large file.
func ParseContext(ctx context.Context, filename string, src []byte) (*Set, error) {
	d := &decoder{ctx: ctx, budget: len(src), size0: len(src)}
	d.c = checker{file: filename, where: d.where, ctx: ctx}
	var exps []Expectation
	if root := d.document(src); root != nil {
		exps = d.top(root)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checking the expectations file: %w", err)
	}
	set := d.c.set(exps)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checking the expectations file: %w", err)
	}
	if len(d.c.issues) > 0 {
		return nil, NewFileError("expectations file", d.c.issues)
	}
	return set, nil
}

// checkEvery is how many expectations are read or checked between two
// looks at the context: often enough to stop within a millisecond or so,
// seldom enough to cost nothing.
const checkEvery = 1024

// decoder walks the YAML nodes of one file.
//
// It keeps no table of where each field is: a file of 4 MiB has hundreds
// of thousands of fields, and a map entry for each (with a map of the
// fields given, and another of the fields seen, per expectation) made
// the check allocate 80 to 130 times the file's size. The place of a
// field is found again in the nodes when a problem is reported there.
type decoder struct {
	ctx     context.Context
	c       checker
	topNode *yaml.Node   // the file's mapping
	defNode *yaml.Node   // the defaults block, nil without one
	items   []*yaml.Node // each expectation's node
	// budget is how many more nodes aliases may stand for (expand), out
	// of size0; overflow is set once they stood for more.
	budget, size0 int
	overflow      bool               // the walk stopped: aliases stood for too much, or too many keys were wrong
	keyIssues     int                // unknown and repeated keys reported
	sizes         map[*yaml.Node]int // size of anchors
}

// where returns the place of a field, or of its expectation when the field
// is not written (a value from defaults, a missing job). i is the index
// of an expectation, -1 the defaults, -2 the file's top mapping.
func (d *decoder) where(i int, field string) filePos {
	var n *yaml.Node
	switch {
	case i == -2:
		n = d.topNode
	case i == -1:
		if d.defNode == nil {
			return d.where(-2, "defaults")
		}
		n = d.defNode
	case i < len(d.items):
		n = d.items[i]
	}
	if n == nil {
		return filePos{1, 1}
	}
	// "upstream.2" is the third item of upstream, "flapping.hold" the key
	// hold in flapping; a part not written stops the walk where it is.
	for part := range strings.SplitSeq(field, ".") {
		if part == "" {
			break
		}
		next := child(n, part)
		if next == nil {
			break
		}
		n = next
	}
	return filePos{n.Line, n.Column}
}

// child returns the value of key in mapping n (its first, as the
// decoder keeps the first of a key given twice), or the item of a list
// at the index key; nil when there is none.
func child(n *yaml.Node, key string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == key {
				return resolve(n.Content[k+1])
			}
		}
	case yaml.SequenceNode:
		if k, err := strconv.Atoi(key); err == nil && k >= 0 && k < len(n.Content) {
			return resolve(n.Content[k])
		}
	}
	return nil
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document returns the file's one YAML document, or nil when the file is
// empty or does not parse.
func (d *decoder) document(src []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			d.syntax(err, src)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.c.issues = append(d.c.issues, &Issue{File: d.c.file, Line: extra.Line, Col: extra.Column,
			Message: "a second YAML document", Hint: "an expectations file is one document; remove the '---' and what follows, or merge it"})
	case !errors.Is(err, io.EOF):
		d.syntax(err, src)
	}
	return &doc
}

// syntax reports a YAML syntax error. The library names the line where
// the enclosing block starts, not always the line of the mistake: the hint
// says so. It names no place for a character it refuses: src is searched
// for it, since it is often invisible.
func (d *decoder) syntax(err error, src []byte) {
	is := &Issue{File: d.c.file, Line: 1, Col: 1, Message: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: "),
		Hint: "the mistake is in the block that starts here; check indentation, quotes and brackets"}
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		is.Line, _ = strconv.Atoi(m[1])
		is.Message = "YAML syntax: " + m[2]
	}
	if bad := sourcefile.BadChar(src, "an expectations file"); bad != nil && sourcefile.Refused(err.Error()) {
		is.Line, is.Col, is.Message, is.Hint = bad.Line, bad.Col, "YAML syntax: "+bad.Message, bad.Hint
	}
	d.c.issues = append(d.c.issues, is)
}

// resolve follows an alias to its anchor.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// expand is resolve for the walk of the file: what an alias stands for
// is walked again at each alias, so an alias costs the nodes under its
// anchor, out of a budget of one node for each byte of the file (the
// most its text could hold written out). Past the budget the file is
// refused, once, at the alias, and the alias reads as null. Before, a
// list of 2 000 names behind an anchor, named by 2 000 expectations (a
// file of 70 KB), took 260 MB, and a mapping of 2 000 keys named by
// 2 000 items (30 KB) 1.4 GB and half a minute: a file of a few MB
// would have held a core for hours and taken the server's memory.
func (d *decoder) expand(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.AliasNode {
		return n
	}
	alias, n := n, resolve(n)
	if d.budget -= d.size(n); d.budget >= 0 {
		return n
	}
	if !d.overflow {
		d.overflow = true
		d.c.issues = append(d.c.issues, &Issue{File: d.c.file, Line: alias.Line, Col: alias.Column,
			Message: fmt.Sprintf("YAML aliases make the file more than %d nodes, one for each of its bytes", d.size0),
			Hint:    "write the values out, or use fewer aliases of large anchors"})
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: alias.Line, Column: alias.Column}
}

// size is the number of nodes under n, n included, aliases counted as
// what they stand for; each anchor's is worked out once.
func (d *decoder) size(n *yaml.Node) int {
	n = resolve(n)
	if len(n.Content) == 0 {
		return 1
	}
	if k, ok := d.sizes[n]; ok {
		return k
	}
	if d.sizes == nil {
		d.sizes = map[*yaml.Node]int{}
	}
	d.sizes[n] = 1 // an anchor inside itself, which the YAML library refuses, adds nothing
	k := 1
	for _, c := range n.Content {
		k += d.size(c)
		if k > d.size0 {
			break // over the whole budget already: no need to count on
		}
	}
	d.sizes[n] = k
	return k
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names a node's kind for "expected ..." messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return quoteShort(n.Value)
}

// mapping calls f for each key and value of a mapping, reporting unknown
// and repeated keys. i and job say whose fields these are; prefix is
// added to field names ("flapping.").
func (d *decoder) mapping(n *yaml.Node, job, prefix string, known []string, f func(key string, v *yaml.Node)) {
	var seen [16]int // the line of each known key seen, by its index in known
	for k := 0; k+1 < len(n.Content) && !d.overflow; k += 2 {
		key := n.Content[k]
		at := slices.Index(known, key.Value)
		switch {
		case at < 0:
			d.keyIssue(&Issue{File: d.c.file, Line: key.Line, Col: key.Column, Job: job, Field: prefix + key.Value,
				Message: "unknown field", Hint: knownHint(known)})
			continue
		case seen[at] > 0:
			d.keyIssue(&Issue{File: d.c.file, Line: key.Line, Col: key.Column, Job: job, Field: prefix + key.Value,
				Message: "given twice", Hint: fmt.Sprintf("the first is at line %d; keep one", seen[at])})
			continue
		}
		seen[at] = max(key.Line, 1)
		if v := d.expand(n.Content[k+1]); !isNull(v) {
			f(known[at], v)
		}
	}
}

// keyIssue reports an unknown or repeated key, up to one for each 8
// bytes of the file: more can only come of aliases of a mapping of many
// keys, or of a file of keys of one letter, and each costs some 200
// bytes. Past that the walk stops.
func (d *decoder) keyIssue(is *Issue) {
	if d.keyIssues++; d.keyIssues <= max(d.size0/8, 100) {
		d.c.issues = append(d.c.issues, is)
		return
	}
	d.overflow = true
	d.c.issues = append(d.c.issues, &Issue{File: d.c.file, Line: is.Line, Col: is.Col,
		Message: fmt.Sprintf("more than %d unknown or repeated fields; the file was read up to here", d.keyIssues-1),
		Hint:    "fix those listed, and send the file again"})
}

// knownHint is the hint of an unknown field among known: made once for
// each list, not for each of the hundreds of thousands a file may hold.
func knownHint(known []string) string {
	switch &known[0] {
	case &expFields[0]:
		return expHint
	case &defaultsFields[0]:
		return defaultsHint
	case &flappingFields[0]:
		return flappingHint
	case &topFields[0]:
		return topHint
	}
	return "known fields are " + strings.Join(known, ", ")
}

var (
	expHint      = "known fields are " + strings.Join(expFields, ", ")
	defaultsHint = "known fields are " + strings.Join(defaultsFields, ", ")
	flappingHint = "known fields are " + strings.Join(flappingFields, ", ")
	topHint      = "known fields are " + strings.Join(topFields, ", ")
)

// fieldSet is a set of an expectation's fields, by their index in
// expFields (the defaults' fields are among them).
type fieldSet uint32

func (s fieldSet) has(field string) bool { return s&fieldBit(field) != 0 }

func fieldBit(field string) fieldSet {
	if k := slices.Index(expFields, field); k >= 0 {
		return 1 << k
	}
	return 0
}

func (s *fieldSet) put(field string, ok bool) {
	if ok {
		*s |= fieldBit(field)
	} else {
		*s &^= fieldBit(field)
	}
}

// wrong reports a value of the wrong shape at the value.
func (d *decoder) wrong(i int, job, field string, v *yaml.Node, expected, hint string) {
	d.c.add(i, job, field, hint, "cannot use %s here: expected %s", describe(v), expected)
}

func (d *decoder) top(doc *yaml.Node) []Expectation {
	n := d.expand(doc)
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = d.expand(n.Content[0])
	}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.c.issues = append(d.c.issues, &Issue{File: d.c.file, Line: n.Line, Col: n.Column,
			Message: fmt.Sprintf("the file is %s", describe(n)), Hint: "write a mapping with defaults: and expectations:"})
		return nil
	}
	d.topNode = n
	var defaults *yaml.Node
	var list *yaml.Node
	d.mapping(n, "", "", topFields, func(key string, v *yaml.Node) {
		if key == "defaults" {
			defaults = v
		} else {
			list = v
		}
	})
	def, given := d.defaults(defaults)
	if list == nil {
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		d.wrong(-2, "", "expectations", list, "a list of expectations", "write expectations: followed by items that start with - job: ...")
		return nil
	}
	exps := make([]Expectation, len(list.Content))
	d.items = make([]*yaml.Node, len(list.Content))
	for k, item := range list.Content {
		if k%checkEvery == 0 && d.ctx.Err() != nil {
			return nil
		}
		if d.overflow {
			return nil
		}
		d.items[k] = d.expand(item)
		d.expectation(k, d.items[k], def, given, &exps[k])
	}
	return exps
}

// defaults reads and checks the defaults block. A default with a problem
// is reported once, here, and not applied.
func (d *decoder) defaults(n *yaml.Node) (Expectation, fieldSet) {
	var def Expectation
	var given fieldSet
	if n == nil {
		return def, given
	}
	d.defNode = n
	if n.Kind != yaml.MappingNode {
		d.wrong(-1, "", "defaults", n, "a mapping", "")
		return def, given
	}
	d.mapping(n, "", "", defaultsFields, func(key string, v *yaml.Node) {
		given.put(key, d.field(-1, "", key, v, &def))
	})
	d.c.location(-1, "", def.Timezone)
	d.c.durations(-1, "", &def)
	d.c.flapping(-1, "", def.Flapping)
	for _, key := range defaultsFields {
		if given.has(key) && d.c.broken(-1, key) {
			given.put(key, false)
		}
	}
	return def, given
}

// expectation reads the expectation at index i into e, which is zero,
// and fills in the defaults for the fields it does not set. e is the
// caller's, in place: a copy made here would escape to the heap, one for
// each item of the file.
func (d *decoder) expectation(i int, n *yaml.Node, def Expectation, defGiven fieldSet, e *Expectation) {
	if n.Kind != yaml.MappingNode {
		d.wrong(i, "", "", n, "an expectation (a mapping)", "start each item with - job: ...")
		return
	}
	// The job's name first, so that every issue of the item names it.
	job := ""
	for k := 0; k+1 < len(n.Content); k += 2 {
		if n.Content[k].Value != "job" {
			continue
		}
		if v := resolve(n.Content[k+1]); v.Kind == yaml.ScalarNode {
			job = v.Value // a scalar: free to resolve (expand is for what has nodes under it)
		}
	}
	var given fieldSet
	d.mapping(n, job, "", expFields, func(key string, v *yaml.Node) {
		given.put(key, d.field(i, job, key, v, e))
	})
	// By value: every: 0 and an empty schedule set nothing to be late
	// for, and a default grace would then be refused as written.
	timed := given.has("schedule") && e.Schedule != "" || given.has("every") && e.Every != 0
	if !given.has("timezone") && e.Schedule != "" && defGiven.has("timezone") {
		e.Timezone = def.Timezone
	}
	if !given.has("grace") && timed {
		e.Grace = DefaultGrace
		if defGiven.has("grace") {
			e.Grace = def.Grace
		}
	}
	if !given.has("max_runtime") && defGiven.has("max_runtime") {
		e.MaxRuntime = def.MaxRuntime
	}
	if !given.has("min_runtime") && defGiven.has("min_runtime") {
		e.MinRuntime = def.MinRuntime
	}
	if !given.has("flapping") && defGiven.has("flapping") {
		e.Flapping = def.Flapping
	}
}

// field decodes one field into e. It reports whether the value was good.
func (d *decoder) field(i int, job, key string, v *yaml.Node, e *Expectation) bool {
	var to any
	switch key { // a switch, not a map made for each field of each expectation
	case "job":
		to = &e.Job
	case "schedule":
		to = &e.Schedule
	case "timezone":
		to = &e.Timezone
	case "every":
		to = &e.Every
	case "grace":
		to = &e.Grace
	case "max_runtime":
		to = &e.MaxRuntime
	case "min_runtime":
		to = &e.MinRuntime
	case "max_runs":
		to = &e.MaxRuns
	case "runs_window":
		to = &e.RunsWindow
	case "upstream":
		to = &e.Upstream
	case "flapping":
		to = &e.Flapping
	}
	return d.value(i, job, key, v, to)
}

// value decodes v into the field to points at, by the field's type. It
// reports whether the value was good.
func (d *decoder) value(i int, job, field string, v *yaml.Node, to any) bool {
	switch to := to.(type) {
	case *string:
		return d.str(i, job, field, v, to)
	case *time.Duration:
		return d.duration(i, job, field, v, to)
	case *int:
		return d.integer(i, job, field, v, to)
	case *[]string:
		return d.names(i, job, field, v, to)
	case *Flapping:
		return d.flappingBlock(i, job, v, to)
	}
	panic(fmt.Sprintf("expect: field %s of type %T", field, to)) // a key of the lists above with no field
}

func (d *decoder) str(i int, job, field string, v *yaml.Node, to *string) bool {
	if v.Kind != yaml.ScalarNode {
		d.wrong(i, job, field, v, "a string", "")
		return false
	}
	*to = v.Value
	return true
}

func (d *decoder) duration(i int, job, field string, v *yaml.Node, to *time.Duration) bool {
	if v.Kind != yaml.ScalarNode {
		d.wrong(i, job, field, v, "a duration", "write a number with a unit, like 30s, 10m or 1h30m")
		return false
	}
	if v.Value == "0" {
		*to = 0
		return true
	}
	x, err := time.ParseDuration(v.Value)
	if err != nil {
		hint := "write a number with a unit, like 30s, 10m or 1h30m, or 0"
		if strings.HasSuffix(v.Value, "d") {
			hint = "write 24h for a day"
		}
		d.c.add(i, job, field, hint, "%s is not a duration", quoteShort(v.Value))
		return false
	}
	*to = x
	return true
}

func (d *decoder) integer(i int, job, field string, v *yaml.Node, to *int) bool {
	x, err := strconv.Atoi(v.Value)
	if err != nil || v.Kind != yaml.ScalarNode {
		d.wrong(i, job, field, v, "a whole number", "")
		return false
	}
	*to = x
	return true
}

func (d *decoder) names(i int, job, field string, v *yaml.Node, to *[]string) bool {
	if v.Kind != yaml.SequenceNode {
		d.wrong(i, job, field, v, "a list of job names", "write upstream: [extract, transform]")
		return false
	}
	if len(v.Content) > maxUpstream { // said here, before a copy of every name (an alias repeats a long list cheaply)
		d.c.add(i, job, field, fmt.Sprintf("at most %d", maxUpstream), "%d jobs listed", len(v.Content))
		return false
	}
	ok := true
	for k, item := range v.Content {
		item = d.expand(item)
		if item.Kind != yaml.ScalarNode || isNull(item) {
			d.wrong(i, job, field+"."+strconv.Itoa(k), item, "a job name", "")
			ok = false
			continue
		}
		*to = append(*to, item.Value)
	}
	return ok
}

func (d *decoder) flappingBlock(i int, job string, v *yaml.Node, to *Flapping) bool {
	if v.Kind != yaml.MappingNode {
		d.wrong(i, job, "flapping", v, "a mapping", "write flapping: {changes: 4, window: 1h, hold: 30m}")
		return false
	}
	ok := true
	d.mapping(v, job, "flapping.", flappingFields, func(key string, v *yaml.Node) {
		var field any = &to.Changes
		switch key {
		case "window":
			field = &to.Window
		case "hold":
			field = &to.Hold
		}
		ok = d.value(i, job, "flapping."+key, v, field) && ok
	})
	return ok
}
