// Package rulebook is the tenants' alert rules as the API reads and
// replaces them (GET and PUT /api/v1/rules): a rules file is checked in
// the rules language and against the channels that serve the tenant,
// refused whole with every problem at its place, saved durably, and only
// then put in force. httpapi declares what it needs (httpapi.RuleBook)
// and cmd/apollo fills it with a Book over the engine of its mode, so the
// HTTP layer knows neither the rules language nor the engine.
package rulebook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/tenantlock"
	"github.com/apollo-11/apollo/rules"
)

// Engine holds the rules that run: the local alert engine
// (alert.Engine), or the alert processes behind Redis
// (redisstore.RemoteAlerts).
type Engine interface {
	Rules(tenant string) []*rules.Rule
	RulesSource(tenant string) []byte
	SetRulesSource(tenant string, rs []*rules.Rule, src []byte)
}

// Book reads and replaces the rules of an Engine.
type Book struct {
	Engine Engine
	// Known checks the NOTIFY names of a tenant's rules against the
	// channels that serve the tenant (notify.Dispatcher.Serves); nil
	// accepts any name.
	Known func(tenant, name string) bool
	// MetricsKept is how long the metrics are kept (retention.rollups):
	// rules that read further back are refused (rules.CheckReach); 0 does
	// not check.
	MetricsKept time.Duration
	// Save writes an accepted file where the tenant's rules are kept
	// (alert.Loader.Write, the rules store in Redis) before the rules run;
	// nil keeps them in memory only. An error refuses the update.
	Save func(tenant string, src []byte) error
}

// Rules are the tenant's rules and inhibit rules, each as its canonical
// text and its JSON form, and the file they came from as the engine holds
// it.
func (b Book) Rules(tenant string) (apiclient.RuleSet, error) {
	r, ok := b.Engine.(sourceReader)
	if !ok {
		src := b.Engine.RulesSource(tenant)
		return view(b.Engine.Rules(tenant), inhibitsOf(src), src)
	}
	src, err := r.ReadRulesSource(tenant)
	if err != nil {
		return apiclient.RuleSet{}, err
	}
	f, err := rules.ParseFile("", src)
	if err != nil { // saved by an alert process, which checked it
		return apiclient.RuleSet{}, fmt.Errorf("the saved rules of tenant %q: %v", tenant, err)
	}
	return view(f.Rules, f.Inhibits, src)
}

// sourceReader is an Engine whose rules are kept elsewhere
// (redisstore.RemoteAlerts: in Redis) and may not be readable now: Rules
// answers its error rather than no rules, which a client that reads,
// edits and puts back the rules would put back.
type sourceReader interface {
	ReadRulesSource(tenant string) ([]byte, error)
}

// view is a rules file as the API shows it.
func view(rs []*rules.Rule, ins []*rules.Inhibit, src []byte) (apiclient.RuleSet, error) {
	set := apiclient.RuleSet{Rules: make([]apiclient.Rule, len(rs)), Inhibits: []apiclient.Rule{}, Source: string(src)}
	for i, r := range rs {
		j, err := r.MarshalJSON()
		if err != nil {
			return apiclient.RuleSet{}, fmt.Errorf("rule %q as JSON: %w", r.Name, err)
		}
		kind := "rate"
		if r.IsEvent() {
			kind = "event"
		}
		set.Rules[i] = apiclient.Rule{Name: r.Name, Kind: kind, Text: r.String(), JSON: j}
	}
	for _, in := range ins {
		j, err := in.MarshalJSON()
		if err != nil {
			return apiclient.RuleSet{}, fmt.Errorf("inhibit rule %q as JSON: %w", in.Name, err)
		}
		set.Inhibits = append(set.Inhibits, apiclient.Rule{Name: in.Name, Kind: "inhibit", Text: in.String(), JSON: j})
	}
	return set, nil
}

// inhibitsOf are the inhibit rules of a tenant's rules file as the engine
// holds it: the engine reads them from the same text (a file it holds was
// accepted, so it parses). A file that cannot have any is not parsed
// again.
func inhibitsOf(src []byte) []*rules.Inhibit {
	if !rules.MayHaveInhibits(src) {
		return nil
	}
	f, err := rules.ParseFile("", src)
	if err != nil {
		return nil
	}
	return f.Inhibits
}

// MaxRules is the most rules (rate, event and inhibit rules together) a
// tenant's rules file may hold when it is put through the API. It is the
// design's figure for one evaluation cycle (10 000 rules within 100 ms,
// docs/architecture.md): one tenant alone may use all of it, no more.
// Without it a body of 4 MiB held 100 000 rules, evaluated at every cycle
// beside every other tenant's, and GET /api/v1/rules answered 26 MB.
// Texts saved before the bound keep running (rules.ParseSaved).
const MaxRules = 10_000

// MaxRulesHint is what to do about a file past MaxRules; apollo rules
// check says it too, before the server is asked.
const MaxRulesHint = "a rule's task_prefix covers every job whose name starts with it: fold the rules that differ only by job into one with a shorter prefix"

// puts makes a tenant's PutRules one at a time, from parsing the body to
// putting its rules in force: the rules in force are then the ones saved
// last, which the next start loads (invariant 9). One lock a tenant: a
// tenant's PUT waits on its save (a disk, Redis), and a PUT of 4 MiB
// is parsed for a second, and neither may hold up another tenant's.
// A PUT allocates about 35× its body (BenchmarkPutRules: 40 000 rules,
// 3.3 MB, ~117 MB), so tenant admins who PUT at once add that up: the
// request body's limit (limits.body_bytes) bounds each.
var puts tenantlock.Locks

// PutRules replaces the tenant's rules with src, a whole rules file as
// text or in its JSON form. A file with problems changes nothing: they
// are returned, each with its place, and the error is nil. A file without
// rules that would remove running ones is refused (an *apollo.Error)
// unless it says so (rules.EmptyMarker), as a rules file must on reload:
// a client that sent nothing by mistake looks just like one that means it.
//
// ifMatch, when not empty, is the apiclient.FileTag of the file the client edited: a
// tenant's file that is another one now (saved meanwhile by someone
// else) is refused with EPRECONDITION (412), and nothing changes. An editor that
// put its whole file back erased, without a word, what another admin had
// saved since it read the file.
func (b Book) PutRules(_ context.Context, tenant string, src []byte, ifMatch string) (apiclient.RuleSet, []apiclient.RuleProblem, error) {
	defer puts.Lock(tenant)()
	if err := b.checkUnchanged(tenant, ifMatch); err != nil {
		return apiclient.RuleSet{}, nil, err
	}
	f, err := rules.ParseFile("", src)
	var rs []*rules.Rule
	if f != nil {
		rs = f.Rules
	}
	if err == nil && b.Known != nil {
		err = rules.CheckChannels(rs, func(name string) bool { return b.Known(tenant, name) })
	}
	if err == nil && b.MetricsKept > 0 {
		err = rules.CheckReach(rs, b.MetricsKept)
	}
	if problems := Problems(err); problems != nil {
		return apiclient.RuleSet{}, problems, nil
	}
	if err != nil {
		return apiclient.RuleSet{}, nil, err
	}
	if n := len(rs) + len(f.Inhibits); n > MaxRules {
		return apiclient.RuleSet{}, nil, &apollo.Error{Code: apollo.ETOOLARGE, Field: "rules",
			Message: fmt.Sprintf("the body has %d rules, over the limit of %d a tenant may have; nothing was changed", n, MaxRules),
			Hint:    MaxRulesHint}
	}
	// Inhibit rules count: a tenant whose only rules are inhibit rules
	// would lose them to an empty body as surely.
	if len(rs) == 0 && len(f.Inhibits) == 0 && !rules.SaysEmpty(src) {
		if n := len(b.Engine.Rules(tenant)) + len(inhibitsOf(b.Engine.RulesSource(tenant))); n > 0 {
			return apiclient.RuleSet{}, nil, &apollo.Error{Code: apollo.EINVALID, Field: "rules",
				Message: fmt.Sprintf("the body has no rules, and %d run now; nothing was changed", n),
				Hint:    "to remove every rule on purpose, send a body with the line " + rules.EmptyMarker + ` (or the JSON form {"rules": []})`}
		}
	}
	// Saved before it is applied: rules that run but vanish at the next
	// restart would be a surprise.
	if b.Save != nil {
		if err := b.Save(tenant, src); err != nil {
			if problems := Problems(err); problems != nil { // the alert processes' own checks
				return apiclient.RuleSet{}, problems, nil
			}
			return apiclient.RuleSet{}, nil, fmt.Errorf("saving the rules of tenant %q: %w", tenant, err)
		}
	}
	b.Engine.SetRulesSource(tenant, rs, src)
	// The answer from what was parsed: reading it back would parse the
	// file again (RemoteAlerts parses what Redis holds).
	set, err := view(rs, f.Inhibits, src)
	return set, nil, err
}

// checkUnchanged refuses an update made from another version of the
// tenant's rules than the one in force; the tenant's lock (puts) is held.
func (b Book) checkUnchanged(tenant, ifMatch string) error {
	if ifMatch == "" || ifMatch == "*" {
		return nil
	}
	cur := b.Engine.RulesSource(tenant)
	if r, ok := b.Engine.(sourceReader); ok {
		var err error
		if cur, err = r.ReadRulesSource(tenant); err != nil {
			return err
		}
	}
	if apiclient.FileTag(string(cur)) == ifMatch {
		return nil
	}
	return apiclient.Changed("rules")
}

// Problems are the positioned problems of a rules error (rules.ErrorList)
// as the API answers them; nil for any other error.
func Problems(err error) []apiclient.RuleProblem {
	var list rules.ErrorList
	if !errors.As(err, &list) {
		return nil
	}
	out := make([]apiclient.RuleProblem, len(list))
	for i, e := range list {
		msg := e.Msg
		if e.Expected != "" {
			msg += " (expected " + e.Expected + ")"
		}
		out[i] = apiclient.RuleProblem{Pos: e.Pos.String(), Line: e.Pos.Line, Col: e.Pos.Col, Message: msg, Hint: e.Hint}
	}
	return out
}
