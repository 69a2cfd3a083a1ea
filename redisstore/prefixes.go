package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/internal/keypart"
)

// Two deployments may share a database under different prefixes, but a
// tenant's metrics live under `<prefix>:<tenant>` (keys.go): a deployment
// at prefix `p:acme` writes its default tenant's metrics into the very
// keys where the deployment at `p` keeps its tenant acme's, and the two
// buses overwrite each other's counts (both write the unsuffixed fields of
// the default writer), so both fire and resolve on the other's runs.
//
// So each bus lists its tenants in `<prefix>:tenants` (a set of the
// escaped names, no TTL: configuration), again at every heartbeat
// (Heartbeat.WithTenants: after Redis lost its data, the list is back
// before a deployment below could start), and before it writes anything
// it checks both ways: whether a deployment above it lists the tenant its
// prefix would be (`p:acme`: is acme in `p:tenants`?), and whether one of
// its tenants' namespaces holds a live deployment (`p:acme:heartbeats`).

// tenantsKey is the set of a deployment's tenants.
func tenantsKey(prefix string) string { return prefix + ":tenants" }

// tenantNames are the members of tenantsKey for tenants: escaped, the
// default tenant left out (its keys are the prefix's own).
func tenantNames(tenants []string) []any {
	var names []any
	for _, t := range tenants {
		if t != "" {
			names = append(names, keypart.Escape(t))
		}
	}
	return names
}

// PrefixClash checks that prefix, with tenants, does not share keys with
// another deployment in the same database, and lists the tenants for the
// others' checks. clash, when not "", says which deployment and how to
// fix it; err is a failure to ask Redis, which says nothing of a clash.
func PrefixClash(ctx context.Context, c redis.UniversalClient, prefix string, tenants []string) (clash string, err error) {
	type above struct {
		prefix, tenant string
		is             *redis.BoolCmd
	}
	type below struct {
		tenant string
		live   *redis.IntCmd
	}
	var ups []above
	var downs []below
	pipe := c.Pipeline()
	for i := range len(prefix) {
		if prefix[i] != ':' {
			continue
		}
		up, rest := prefix[:i], prefix[i+1:]
		if rest == "" || strings.Contains(rest, ":") {
			continue // an escaped tenant is one segment
		}
		ups = append(ups, above{up, rest, pipe.SIsMember(ctx, tenantsKey(up), rest)})
	}
	names := tenantNames(tenants)
	for _, t := range tenants {
		if t != "" {
			downs = append(downs, below{t, pipe.Exists(ctx, beatIndex(prefix+":"+keypart.Escape(t)))})
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return "", fmt.Errorf("redisstore: checking that no other deployment shares the keys of prefix %q: %w", prefix, err)
		}
	}
	for _, u := range ups {
		if u.is.Val() {
			return fmt.Sprintf("redis.prefix %q is where the deployment at prefix %q keeps the metrics of its tenant %q (key %s lists it): the two would overwrite each other's counts; give this deployment a prefix that is not another's followed by ':' and one of its tenants",
				prefix, u.prefix, u.tenant, tenantsKey(u.prefix)), nil
		}
	}
	for _, d := range downs {
		if d.live.Val() > 0 {
			at := prefix + ":" + keypart.Escape(d.tenant)
			return fmt.Sprintf("redis.prefix %q: a deployment at prefix %q (its heartbeats are in %s) uses the keys where this one keeps the metrics of its tenant %q: the two would overwrite each other's counts; give one of them another prefix",
				prefix, at, beatIndex(at), d.tenant), nil
		}
	}
	if len(names) > 0 {
		if err := c.SAdd(ctx, tenantsKey(prefix), names...).Err(); err != nil {
			return "", fmt.Errorf("redisstore: listing the tenants in %s: %w", tenantsKey(prefix), err)
		}
	}
	return "", nil
}
