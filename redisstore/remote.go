package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/rules"
)

// RemoteAlerts is the bus's view of alerting in the three-process mode: it
// reads what the alert processes saved in Redis and sends changes
// to the alert processes as commands. It satisfies httpapi.AlertEngine.
type RemoteAlerts struct {
	c      redis.UniversalClient
	prefix string
	state  *AlertState
	rules  *Rules
	cmd    *Commander
	log    *slog.Logger
}

// NewRemoteAlerts returns a view using cmd for the changes.
func NewRemoteAlerts(c redis.UniversalClient, prefix string, cmd *Commander, log *slog.Logger) *RemoteAlerts {
	return &RemoteAlerts{c: c, prefix: prefix, state: NewAlertState(c, prefix, nil), rules: NewRules(c, prefix), cmd: cmd, log: log}
}

func (r *RemoteAlerts) load() alert.State {
	st, err := r.read()
	if err != nil {
		r.log.Warn("reading the alert state from Redis", "err", err)
	}
	return st
}

// read is the alert state the leader saved.
func (r *RemoteAlerts) read() (alert.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.state.Load(ctx)
}

// unreadable answers a read of what the alert processes keep in Redis
// that Redis did not answer: 503, the cause in the bus's log. An empty
// list would tell the dashboard there is nothing, and a client that
// reads the rules, edits them and puts them back would put back nothing.
func (r *RemoteAlerts) unreadable(what, tenant string, err error) error {
	r.log.Error("reading the "+what+" from Redis", "tenant", tenant, "err", err)
	return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the " + what + " could not be read from Redis",
		Hint: "the bus's log says why; try again"}
}

// Alerts returns the leader's alerts of a tenant, in a state ("" = all).
func (r *RemoteAlerts) Alerts(tenant string, state apollo.AlertState) []apollo.Alert {
	return alertsOf(r.load(), tenant, state)
}

func alertsOf(st alert.State, tenant string, state apollo.AlertState) []apollo.Alert {
	var out []apollo.Alert
	for _, a := range st.Alerts {
		if a.Tenant == tenant && (state == "" || a.State == state) {
			out = append(out, a.Alert)
		}
	}
	return out
}

// ReadAlerts is Alerts and Silences from one read, with the error when
// Redis does not answer.
func (r *RemoteAlerts) ReadAlerts(tenant string, state apollo.AlertState) ([]apollo.Alert, []alert.Silence, error) {
	st, err := r.read()
	if err != nil {
		return nil, nil, r.unreadable("alerts", tenant, err)
	}
	return alertsOf(st, tenant, state), silencesOf(st, tenant), nil
}

// Ack asks the alert processes to acknowledge the alert (by its rule and
// group, since each names its episodes itself).
func (r *RemoteAlerts) Ack(ctx context.Context, tenant, id, by string) error {
	cmd := Command{Op: "ack", Tenant: tenant, By: by, AlertID: id}
	st, err := r.read()
	if err != nil { // not "no alert": the alert may well be there
		return r.unreadable("alerts", tenant, err)
	}
	for _, a := range st.Alerts {
		if a.Tenant == tenant && a.ID == id {
			if a.State == apollo.AlertResolved {
				// As the engine answers: the alert processes would find
				// the rule and group's next episode, one nobody has seen.
				return &apollo.Error{Code: apollo.ECONFLICT, Field: "id", Message: "alert " + id + " is resolved",
					Hint: "there is nothing left to acknowledge"}
			}
			cmd.Rule, cmd.Group = a.Rule, a.Group
		}
	}
	if cmd.Rule == "" {
		return &apollo.Error{Code: apollo.ENOTFOUND, Field: "id", Message: "no alert " + id,
			Hint: "list the alerts with GET /api/v1/alerts"}
	}
	_, err = r.do(ctx, cmd)
	return err
}

// do sends cmd to the alert processes. A failure to reach them through
// Redis is answered 503, the cause in the bus's log; their own answers,
// and that none answered, pass as they are.
func (r *RemoteAlerts) do(ctx context.Context, cmd Command) (Reply, error) {
	rep, err := r.cmd.Do(ctx, cmd)
	if _, ok := errors.AsType[*apollo.Error](err); err == nil || ok {
		return rep, err
	}
	r.log.Error("sending a command to the alert processes through Redis", "op", cmd.Op, "tenant", cmd.Tenant, "err", err)
	return rep, &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the alert processes could not be reached through Redis, so nothing was changed",
		Hint: "the bus's log says why; try again"}
}

// Silences returns a tenant's silences that have not ended, as the alert
// processes saved them, soonest end first (as alert.Engine.Silences).
func (r *RemoteAlerts) Silences(tenant string) []alert.Silence {
	return silencesOf(r.load(), tenant)
}

func silencesOf(st alert.State, tenant string) []alert.Silence {
	now := time.Now()
	var out []alert.Silence
	for _, s := range st.Silences {
		if s.Tenant == tenant && now.Before(s.EndsAt) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b alert.Silence) int {
		return cmp.Or(a.EndsAt.Compare(b.EndsAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

// AddSilence sends the silence, with an ID chosen here so that every alert
// process holds it under the same one.
func (r *RemoteAlerts) AddSilence(tenant string, s alert.Silence) (alert.Silence, error) {
	if err := alert.CheckSilence(&s, time.Now()); err != nil {
		return alert.Silence{}, err
	}
	if s.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.ID = hex.EncodeToString(b[:])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := r.do(ctx, Command{Op: "silence.add", Tenant: tenant, Silence: &s})
	if err != nil {
		return alert.Silence{}, err
	}
	return *rep.Silence, nil
}

// RemoveSilence sends the removal.
func (r *RemoteAlerts) RemoveSilence(tenant, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.do(ctx, Command{Op: "silence.remove", Tenant: tenant, SilenceID: id})
	return err
}

// Rules parses the rules text the alert processes saved.
func (r *RemoteAlerts) Rules(tenant string) []*rules.Rule {
	f, err := rules.ParseSaved("rules", r.RulesSource(tenant))
	if err != nil {
		return nil
	}
	return f.Rules
}

// RulesSource returns the rules text the alert processes saved: the text
// they run.
func (r *RemoteAlerts) RulesSource(tenant string) []byte {
	src, err := r.ReadRulesSource(tenant)
	if err != nil {
		r.log.Warn("reading the rules from Redis", "err", err)
	}
	return src
}

// ReadRulesSource is RulesSource with the error when Redis does not
// answer.
func (r *RemoteAlerts) ReadRulesSource(tenant string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	src, err := r.rules.Source(ctx, tenant)
	if err != nil {
		return nil, r.unreadable("rules", tenant, err)
	}
	return src, nil
}

// SetRulesSource does nothing: SaveRules already sent the rules to the
// alert processes (httpapi calls SaveRules first and stops if it fails).
func (r *RemoteAlerts) SetRulesSource(string, []*rules.Rule, []byte) {}

// SaveRules sends a validated rules file to the alert processes. Their
// refusal of its rules (an unknown channel) is a rules.ErrorList.
func (r *RemoteAlerts) SaveRules(tenant string, src []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := r.do(ctx, Command{Op: "rules.set", Tenant: tenant, Rules: string(src)})
	if len(rep.Problems) > 0 {
		return rep.Problems
	}
	return err
}

// Engine is what HandleCommand needs of an alert engine (alert.Engine).
type Engine interface {
	Alerts(tenant string, state apollo.AlertState) []apollo.Alert
	Ack(ctx context.Context, tenant, id, by string) error
	AddSilence(tenant string, s alert.Silence) (alert.Silence, error)
	RemoveSilence(tenant, id string) error
	SetRulesSource(tenant string, rs []*rules.Rule, src []byte)
	SelfAlert(name string, sev apollo.Severity, summary string)
}

// HandleCommand applies a command from the bus to an alert process's
// engine. saveRules (may be nil) checks and persists the rules of a
// rules command, parsed here once (the loader's file for the default
// tenant). An error that is not an *apollo.Error is
// logged here and answered as internal, without its text: it may name the
// alert process's files, which are no business of the bus's client.
func HandleCommand(ctx context.Context, e Engine, cmd Command, saveRules func(tenant string, rs []*rules.Rule, src []byte) error, log *slog.Logger) Reply {
	rep, err := handleCommand(ctx, e, cmd, saveRules)
	if err == nil {
		return rep
	}
	errors.As(err, &rep.Problems)
	var ae *apollo.Error
	if !errors.As(err, &ae) {
		log.Error("a command from the bus failed", "op", cmd.Op, "tenant", cmd.Tenant, "err", err)
		ae = &apollo.Error{Code: apollo.EINTERNAL, Message: "internal error", Hint: "the alert process's log has the details"}
	}
	return Reply{Err: ae, Problems: rep.Problems}
}

func handleCommand(ctx context.Context, e Engine, cmd Command, saveRules func(tenant string, rs []*rules.Rule, src []byte) error) (Reply, error) {
	switch cmd.Op {
	case "ack":
		id := cmd.AlertID
		all := e.Alerts(cmd.Tenant, "")
		if !slices.ContainsFunc(all, func(a apollo.Alert) bool { return a.ID == cmd.AlertID }) {
			// Not an episode of this process (the other one of an HA pair
			// fired it): its own episode of the same rule and group. One
			// of its own, resolved, is answered as resolved.
			for _, a := range all {
				if a.State != apollo.AlertResolved && a.Rule == cmd.Rule && a.Group == cmd.Group {
					id = a.ID
				}
			}
		}
		return Reply{}, e.Ack(ctx, cmd.Tenant, id, cmd.By)
	case "silence.add":
		if cmd.Silence == nil {
			return Reply{}, &apollo.Error{Code: apollo.EINVALID, Message: "silence.add without a silence"}
		}
		s, err := e.AddSilence(cmd.Tenant, *cmd.Silence)
		if err != nil {
			return Reply{}, err
		}
		return Reply{Silence: &s}, nil
	case "silence.remove":
		return Reply{}, e.RemoveSilence(cmd.Tenant, cmd.SilenceID)
	case "rules.set":
		rs, err := rules.Parse("", []byte(cmd.Rules)) // places as the bus's API gives them
		if err != nil {
			return Reply{}, err
		}
		if saveRules != nil {
			if err := saveRules(cmd.Tenant, rs, []byte(cmd.Rules)); err != nil {
				return Reply{}, err
			}
		}
		e.SetRulesSource(cmd.Tenant, rs, []byte(cmd.Rules))
		return Reply{}, nil
	case "self":
		e.SelfAlert(cmd.Name, apollo.SeverityCritical, cmd.Summary)
		return Reply{}, nil
	}
	return Reply{}, &apollo.Error{Code: apollo.EINVALID, Message: "unknown command " + cmd.Op}
}
