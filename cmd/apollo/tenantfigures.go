package main

import (
	"maps"

	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore"
)

// What a tenant's token sees of the server's own figures (/metrics,
// GET /api/v1/system, the stream's system message; docs/security.md,
// "The server's own figures"): every count, which is a total over every
// tenant and names nothing, and of the notification channels only those
// that serve its tenant. The default tenant's tokens are the operators'
// and see every channel: their Prometheus must see a tenant's failing
// channel.

// everyTenant is a part of GET /api/v1/system that names nothing of a
// tenant's: every tenant sees the same.
func everyTenant(read func() any) func(string) any {
	return func(string) any { return read() }
}

// channelStatsFor are the dispatcher's counters as tenant may see them.
func channelStatsFor(d *notify.Dispatcher, tenant string) notify.Stats {
	s := d.Stats()
	if tenant != "" {
		maps.DeleteFunc(s.Channels, func(name string, _ notify.ChannelStats) bool { return !d.Serves(tenant, name) })
	}
	return s
}

// beatsFor are the heartbeats of other processes as tenant may see them:
// the channels in an alert process's delivery counters (Beat.Stats, as
// decoded from Redis) cut to those serves says serve the tenant, in this
// process's configuration; a channel it does not know is left out.
func beatsFor(beats []redisstore.Beat, tenant string, serves func(tenant, channel string) bool) []redisstore.Beat {
	if tenant == "" {
		return beats
	}
	out := make([]redisstore.Beat, len(beats))
	for i, b := range beats {
		b.Stats = statsFor(b.Stats, tenant, serves)
		out[i] = b
	}
	return out
}

func statsFor(stats any, tenant string, serves func(tenant, channel string) bool) any {
	m, ok := stats.(map[string]any)
	if !ok {
		return stats
	}
	n, ok := m["notifications"].(map[string]any)
	if !ok {
		return stats
	}
	channels, _ := n["channels"].(map[string]any)
	mine := make(map[string]any, len(channels))
	for name, c := range channels {
		if serves(tenant, name) {
			mine[name] = c
		}
	}
	n = maps.Clone(n)
	n["channels"] = mine
	m = maps.Clone(m)
	m["notifications"] = n
	return m
}
