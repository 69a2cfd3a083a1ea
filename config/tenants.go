package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTenantLen bounds a tenant's name: it is in every key, log line and
// message of the tenant.
const MaxTenantLen = 128

// CheckTenant says what is wrong with a tenant's name, or nil. A name is
// what a person reads in messages, logs and the dashboard: at most
// MaxTenantLen bytes of UTF-8, with no control character and no space at
// either end (a tenant "ops " and "ops" would look the same and be two).
// The default tenant is "".
func CheckTenant(name string) error {
	switch {
	case len(name) > MaxTenantLen:
		return fmt.Errorf("%d bytes long: use at most %d", len(name), MaxTenantLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%q is not UTF-8", name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%q holds a control character: use letters, digits and punctuation", name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%q begins or ends with a space", name)
	}
	return nil
}

// checkTenants refuses a tenant name CheckTenant refuses, wherever the
// configuration names one.
func (c *Config) checkTenants(bad func(key, format string, args ...any)) {
	for i, t := range c.Auth.Tokens {
		if err := CheckTenant(t.Tenant); err != nil {
			bad(fmt.Sprintf("auth.tokens[%d].tenant", i), "%v", err)
		}
	}
	for tenant := range c.Limits.Tenants {
		if err := CheckTenant(tenant); err != nil {
			bad(fmt.Sprintf("limits.tenants[%q]", tenant), "%v", err)
		}
	}
	for name, tenants := range c.channelTenants() {
		for _, t := range tenants {
			if err := CheckTenant(t); err != nil {
				bad("channels."+name+".tenants", "%v", err)
			}
		}
	}
}

// channelTenants returns the tenants each channel lists (notify/channels
// reads the same field; a malformed one is its error to report).
func (c *Config) channelTenants() map[string][]string {
	m := map[string][]string{}
	for name, ch := range c.Channels {
		list, _ := ch["tenants"].([]any)
		for _, v := range list {
			if s, ok := v.(string); ok && s != "*" {
				m[name] = append(m[name], s)
			}
		}
	}
	return m
}

// Warnings returns what in a valid configuration is most likely a
// mistake, one sentence each, for the processes to log at start: a
// channel or a limit for a tenant that no token has (a typo, say
// "data_team" for "data-team") serves or limits nobody. With no tokens
// there is only the default tenant, and nothing is checked.
func (c *Config) Warnings() []string {
	if len(c.Auth.Tokens) == 0 {
		return nil
	}
	known := map[string]bool{}
	for _, t := range c.Auth.Tokens {
		known[t.Tenant] = true
	}
	var names []string
	for _, t := range slices.Sorted(maps.Keys(known)) {
		names = append(names, fmt.Sprintf("%q", t))
	}
	have := strings.Join(names, ", ")
	var out []string
	unknown := func(key, tenant string) {
		out = append(out, fmt.Sprintf("%s names tenant %q, which no token in auth.tokens has, so it applies to nobody (the tokens' tenants: %s)", key, tenant, have))
	}
	chans := c.channelTenants()
	for _, name := range slices.Sorted(maps.Keys(chans)) {
		for _, t := range chans[name] {
			if !known[t] {
				unknown("channels."+name+".tenants", t)
			}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(c.Limits.Tenants)) {
		if !known[t] {
			unknown(fmt.Sprintf("limits.tenants[%q]", t), t)
		}
	}
	return out
}
