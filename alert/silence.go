package alert

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// Silence is the domain's silence (apollo.Silence); the engine checks,
// keeps and applies them.
type Silence = apollo.Silence

// Limits on silences: they bound what one tenant can make the engine hold
// and check.
const (
	MaxSilences      = 1000 // per tenant
	MaxSilenceLength = 366 * 24 * time.Hour
	maxCommentBytes  = 1024
	maxSilenceLabels = 32
	// A silence matches rule names, prefixes and label names, which are
	// at most apollo.MaxNameBytes long; label values it holds to the
	// comment's size.
	maxLabelValueBytes = maxCommentBytes
)

// CheckSilence fills StartsAt and reports the first thing wrong with s,
// for the person who wrote it. AddSilence checks; a process that sends
// silences to the engine elsewhere checks too, so that nothing it cannot
// send or the engine cannot save leaves it.
func CheckSilence(s *Silence, now time.Time) error {
	bad := func(field, msg, hint string) error {
		return &apollo.Error{Code: apollo.EINVALID, Field: field, Message: msg, Hint: hint}
	}
	if s.StartsAt.IsZero() {
		s.StartsAt = now
	}
	longLabel := labelTooLong(s.Labels)
	switch {
	case s.ID != "" && !validID(s.ID):
		return bad("id", fmt.Sprintf("%q is not an ID", s.ID), "leave it out: the server makes one")
	case s.Rule == "" && s.Group == "" && s.Prefix == "" && len(s.Labels) == 0:
		return bad("rule", "the silence matches nothing in particular", "give a rule, a group, a prefix or labels: a silence of everything hides real trouble")
	case len(s.Labels) > maxSilenceLabels:
		return bad("labels", fmt.Sprintf("%d labels, over the limit of %d", len(s.Labels), maxSilenceLabels), "")
	case slices.Contains(slices.Collect(maps.Keys(s.Labels)), ""):
		return bad("labels", "a label has an empty name", "")
	case len(s.Rule) > apollo.MaxNameBytes:
		return bad("rule", fmt.Sprintf("%d bytes, over the limit of %d", len(s.Rule), apollo.MaxNameBytes), "no rule has a longer name")
	case len(s.Group) > apollo.MaxNameBytes:
		return bad("group", fmt.Sprintf("%d bytes, over the limit of %d", len(s.Group), apollo.MaxNameBytes), "no rule or job has a longer name")
	case len(s.Prefix) > apollo.MaxNameBytes:
		return bad("prefix", fmt.Sprintf("%d bytes, over the limit of %d", len(s.Prefix), apollo.MaxNameBytes), "no rule or job has a longer prefix")
	case longLabel != "":
		return bad("labels", longLabel, "")
	case s.StartsAt.Sub(now) > MaxSilenceLength: // so its end is within two years, a time its saved form holds
		return bad("startsAt", fmt.Sprintf("%s is more than a year ahead", s.StartsAt.UTC().Format(time.RFC3339)), "make the silence closer to its time")
	case s.EndsAt.IsZero():
		return bad("endsAt", "missing", "give endsAt, or a duration such as 2h")
	case !s.EndsAt.After(s.StartsAt):
		return bad("endsAt", fmt.Sprintf("%s is not after startsAt %s", s.EndsAt.Format(time.RFC3339), s.StartsAt.Format(time.RFC3339)), "")
	case !s.EndsAt.After(now):
		return bad("endsAt", "the silence would already be over", "give a time in the future")
	case s.EndsAt.Sub(s.StartsAt) > MaxSilenceLength:
		// Not the length itself: past 292 years it is a saturated number.
		return bad("endsAt", fmt.Sprintf("%s is more than a year after startsAt %s, the limit",
			s.EndsAt.UTC().Format(time.RFC3339), s.StartsAt.UTC().Format(time.RFC3339)), "fix the rule instead of silencing it for ever")
	case strings.TrimSpace(s.Comment) == "":
		return bad("comment", "missing", "say why, for the people who see the alert later")
	case len(s.Comment) > maxCommentBytes || !utf8.ValidString(s.Comment):
		return bad("comment", fmt.Sprintf("not valid UTF-8 text of at most %d bytes", maxCommentBytes), "link to a ticket for the long story")
	case s.CreatedBy == "":
		return bad("createdBy", "missing", "say who silences")
	}
	return nil
}

// labelTooLong says which label of a silence is too long, or "".
func labelTooLong(labels map[string]string) string {
	for k, v := range labels {
		switch {
		case len(k) > apollo.MaxNameBytes:
			return fmt.Sprintf("a label name of %d bytes, over the limit of %d", len(k), apollo.MaxNameBytes)
		case len(v) > maxLabelValueBytes:
			return fmt.Sprintf("label %q: a value of %d bytes, over the limit of %d", k, len(v), maxLabelValueBytes)
		}
	}
	return ""
}

// validID accepts what newID makes and what people type in fixtures: up to
// 64 bytes of [A-Za-z0-9_.-].
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Silences returns the tenant's silences that have not ended, soonest end
// first.
func (e *Engine) Silences(tenant string) []Silence {
	out := slices.Clone(e.silences.current()[tenant])
	slices.SortFunc(out, func(a, b Silence) int { return cmpSilence(&a, &b) })
	return out
}

func cmpSilence(a, b *Silence) int {
	if c := a.EndsAt.Compare(b.EndsAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// AddSilence checks s and adds it to the tenant's silences. The engine
// sets Tenant, CreatedAt, StartsAt (when zero: now) and ID (when empty). A
// silence given with the ID of one that exists replaces it.
func (e *Engine) AddSilence(tenant string, s Silence) (Silence, error) {
	now := e.clock.Now()
	s.Tenant = tenant
	s.Labels = maps.Clone(s.Labels)
	if err := CheckSilence(&s, now); err != nil {
		return Silence{}, err
	}
	if s.ID == "" {
		s.ID = newID()
	}
	s.CreatedAt = now
	err := e.updateSilences(tenant, func(list []Silence) ([]Silence, error) {
		if i := slices.IndexFunc(list, func(o Silence) bool { return o.ID == s.ID }); i >= 0 {
			list[i] = s
			return list, nil
		}
		if len(list) >= MaxSilences {
			return nil, &apollo.Error{Code: apollo.ECONFLICT, Field: "silences",
				Message: fmt.Sprintf("the tenant has %d silences, the limit", MaxSilences), Hint: "remove silences you no longer need"}
		}
		return append(list, s), nil
	})
	if err != nil {
		return Silence{}, err
	}
	e.log.Info("alert: silence added", "tenant", tenant, "id", s.ID, "rule", s.Rule, "group", s.Group, "prefix", s.Prefix,
		"until", s.EndsAt, "by", s.CreatedBy)
	return s, nil
}

// RemoveSilence ends a silence now. Alerts it held back are notified at the
// next evaluation if they still fire.
func (e *Engine) RemoveSilence(tenant, id string) error {
	err := e.updateSilences(tenant, func(list []Silence) ([]Silence, error) {
		i := slices.IndexFunc(list, func(o Silence) bool { return o.ID == id })
		if i < 0 {
			return nil, &apollo.Error{Code: apollo.ENOTFOUND, Field: "id", Message: fmt.Sprintf("no silence %q", id),
				Hint: "list the silences with GET /api/v1/silences"}
		}
		return slices.Delete(list, i, i+1), nil
	})
	if err != nil {
		return err
	}
	e.log.Info("alert: silence removed", "tenant", tenant, "id", id)
	return nil
}

// updateSilences replaces the tenant's list with what f makes of a copy,
// and saves the state before it returns: a silence is confirmed only once
// it is durable.
func (e *Engine) updateSilences(tenant string, f func([]Silence) ([]Silence, error)) error {
	return e.silences.update(tenant, f, func(undo func()) error { return e.persistChange("silence", undo) })
}
