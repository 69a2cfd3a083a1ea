package apollo

import (
	"strings"
	"time"
)

// Silence stops notifications of the alerts it matches between StartsAt and
// EndsAt. The alerts still change state and show in the API. Every matcher
// that is set must match: Rule is a rule name, Group the alert's group
// exactly and Prefix a prefix of it (the group is the rule's prefix, or
// the job with BY: name), Labels must all be among the alert's labels.
type Silence struct {
	ID        string            `json:"id"`
	Tenant    string            `json:"tenant,omitempty"`
	Rule      string            `json:"rule,omitempty"`
	Group     string            `json:"group,omitempty"`
	Prefix    string            `json:"prefix,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	StartsAt  time.Time         `json:"startsAt"`
	EndsAt    time.Time         `json:"endsAt"`
	CreatedBy string            `json:"createdBy"`
	CreatedAt time.Time         `json:"createdAt"`
	Comment   string            `json:"comment"`
}

// Active reports whether s silences at now.
func (s *Silence) Active(now time.Time) bool {
	return !now.Before(s.StartsAt) && now.Before(s.EndsAt)
}

// Matches reports whether every matcher of s fits a. It does not look at
// time; see Active.
func (s *Silence) Matches(a *Alert) bool {
	if s.Rule != "" && s.Rule != a.Rule {
		return false
	}
	if s.Group != "" && s.Group != a.Group {
		return false
	}
	if s.Prefix != "" && !strings.HasPrefix(a.Group, s.Prefix) {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := a.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
