package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make API tokens",
	}
	var name, role, tenant, jobPrefix string
	var rate int
	create := &cobra.Command{
		Use:   "create",
		Short: "Make a token: prints the secret once and the line for apollo.yaml",
		Long: `Make a new random token. The secret is printed once and never stored:
apollo.yaml keeps only its SHA-256. Roles:

  agent     report events and pings only
  viewer    read tasks, metrics, alerts, rules
  operator  viewer + acknowledge, silence, correct tasks, trigger jobs, test channels
  admin     operator + rules, audit log

A token belongs to one tenant: it sees and changes only that tenant's data.`,
		Example: `  apollo token create --name ci-runner --role agent --tenant data-team
  apollo token create --name backup-ping --role agent --job-prefix backup
  apollo token create --name oncall --role operator`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := httpapi.ParseRole(role)
			if err != nil {
				return usageError("%v", err)
			}
			if err := config.CheckTenant(tenant); err != nil {
				return usageError("--tenant: %v", err)
			}
			if rate < 0 {
				return usageError("--rate %d: use a number of events per second, or 0 for limits.ingest_per_second", rate)
			}
			// A prefix narrows only what a token reports: on any other role
			// it would print a line that looks limited and is not.
			if jobPrefix != "" && r != httpapi.RoleAgent {
				return usageError("--job-prefix limits what an agent token reports; a token of role %s would still do all that role allows (use --role agent, or leave out --job-prefix)", role)
			}
			if name == "" {
				name = role
			}
			secret, tok, err := httpapi.NewToken(name, r, tenant)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Secret (shown once; give it to the client as \"Authorization: Bearer <secret>\"):\n\n  %s\n\n", secret)
			fmt.Fprintf(out, "Add to apollo.yaml under auth.tokens:\n\n")
			// Every string as a YAML double-quoted scalar (a JSON string is
			// one): a name such as "ci, role: admin" must not read as a role.
			line := fmt.Sprintf("  - {name: %s, role: %s, tenant: %s, sha256: %x", yamlString(name), role, yamlString(tenant), tok.Hash)
			if jobPrefix != "" {
				line += ", job_prefix: " + yamlString(jobPrefix)
			}
			if rate > 0 {
				line += fmt.Sprintf(", rate: %d", rate)
			}
			fmt.Fprintln(out, line+"}")
			if jobPrefix != "" {
				fmt.Fprintf(out, "\nPing URL for cron: curl -fsS \"http://HOST:1969/ping/%sJOB?key=%s\"\n", url.PathEscape(jobPrefix), secret)
			}
			return nil
		},
	}
	fl := create.Flags()
	fl.StringVar(&name, "name", "", "a name for the audit log (default: the role)")
	fl.StringVar(&role, "role", "viewer", "agent, viewer, operator or admin")
	fl.StringVar(&tenant, "tenant", "", "the tenant the token belongs to (default: the default tenant)")
	fl.StringVar(&jobPrefix, "job-prefix", "", "limit an agent token to jobs starting with this (a ping key)")
	fl.IntVar(&rate, "rate", 0, "events per second this token may ingest (default: limits.ingest_per_second)")
	cmd.AddCommand(create)
	return cmd
}

// tokensFromConfig turns configured tokens into httpapi tokens.
func tokensFromConfig(cfg []config.Token) ([]httpapi.Token, error) {
	out := make([]httpapi.Token, 0, len(cfg))
	for i, t := range cfg {
		h, err := httpapi.ParseTokenHash(strings.ToLower(t.SHA256))
		if err != nil {
			return nil, fmt.Errorf("auth.tokens[%d] (%s): %w", i, t.Name, err)
		}
		r, err := httpapi.ParseRole(t.Role)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens[%d] (%s): %w", i, t.Name, err)
		}
		out = append(out, httpapi.Token{Name: t.Name, Hash: h, Role: r, Tenant: t.Tenant, Rate: t.RateMax, JobPrefix: t.JobPrefix})
	}
	return out, nil
}

// allowedHosts are the host names a server without tokens answers to,
// besides addresses and loopback names (httpapi.Options.AllowedHosts): the
// configured ones and the names in listen and external_url.
func allowedHosts(cfg config.Config) []string {
	hosts := slices.Clone(cfg.Auth.AllowedHosts)
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if u, err := url.Parse(cfg.ExternalURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// yamlString writes s as a YAML double-quoted scalar: JSON's string form,
// which YAML reads as the same string.
func yamlString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}
