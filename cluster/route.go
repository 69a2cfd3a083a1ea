package cluster

import (
	"fmt"
	"strconv"
	"strings"
)

// Subjects and names in NATS. They are part of the protocol agents may
// publish to directly (docs/scale-out.md): changing them is a migration.
const (
	// EventsStream holds the reported events, one subject per tenant and
	// partition: apollo.events.<tenant>.<partition>.
	EventsStream = "APOLLO_EVENTS"
	// LogStream holds each partition's decision log: apollo.log.<partition>.
	LogStream = "APOLLO_LOG"
	// LeaseBucket is the key-value bucket of partition leases and node
	// heartbeats.
	LeaseBucket = "APOLLO_PARTITIONS"
	// SettingsBucket is the key-value bucket of the cluster's settings that
	// every node must share: the partition count (key "partitions"),
	// written once by the first node.
	SettingsBucket = "APOLLO_CLUSTER"

	eventsPrefix  = "apollo.events."
	logPrefix     = "apollo.log."
	changesPrefix = "apollo.changes."
	rpcPrefix     = "apollo.rpc."
)

// Partition is the partition of a task: FNV-1a (32-bit) of the task ID's
// bytes, modulo n. It is stable across releases and machines, so agents may
// compute it themselves.
func Partition(taskID string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(taskID); i++ {
		h ^= uint32(taskID[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// TenantToken is the subject token of a tenant: "_" for no tenant; other
// tenants as they are when they hold only letters, digits and '-', and
// otherwise with every other byte (including '_') written as %XX.
func TenantToken(tenant string) string {
	if tenant == "" {
		return "_"
	}
	plain := true
	for i := 0; i < len(tenant); i++ {
		if !tokenByte(tenant[i]) {
			plain = false
			break
		}
	}
	if plain {
		return tenant
	}
	var b strings.Builder
	for i := 0; i < len(tenant); i++ {
		c := tenant[i]
		if tokenByte(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// ParseTenantToken reverses TenantToken. It refuses what TenantToken
// never writes, so one tenant has exactly one token.
func ParseTenantToken(tok string) (string, error) {
	if tok == "_" {
		return "", nil
	}
	if tok == "" {
		return "", fmt.Errorf("cluster: empty tenant token")
	}
	if !strings.Contains(tok, "%") {
		for i := 0; i < len(tok); i++ {
			if !tokenByte(tok[i]) {
				return "", fmt.Errorf("cluster: tenant token %q: byte %q must be escaped", tok, tok[i])
			}
		}
		return tok, nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '%' {
			if !tokenByte(c) {
				return "", fmt.Errorf("cluster: tenant token %q: byte %q must be escaped", tok, c)
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(tok) {
			return "", fmt.Errorf("cluster: tenant token %q: cut escape", tok)
		}
		v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
		if err != nil || tokenByte(byte(v)) || strings.ToUpper(tok[i+1:i+3]) != tok[i+1:i+3] {
			return "", fmt.Errorf("cluster: tenant token %q: bad escape %q", tok, tok[i:i+3])
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// EventSubject is the subject an event of tenant for partition p goes to.
func EventSubject(tenant string, p int) string {
	return string(appendEventSubject(nil, TenantToken(tenant), p))
}

// appendEventSubject appends EventSubject's form for the tenant whose
// TenantToken is tok.
func appendEventSubject(b []byte, tok string, p int) []byte {
	b = append(b, eventsPrefix...)
	b = append(b, tok...)
	b = append(b, '.')
	return strconv.AppendInt(b, int64(p), 10)
}

// MsgID is the Nats-Msg-Id of an event: JetStream drops a second message
// with the same ID within the stream's duplicate window, whatever its
// subject. It is "<tenant token>/<taskID>:<sequence>", the token "_"
// without a tenant as in the subject: a token holds no "/", so two
// tenants' events never share an ID. Without a tenant it used to be
// "<taskID>:<sequence>", which a task of the default tenant named
// "acme/nightly" shared with tenant acme's task "nightly": whichever came
// second was answered duplicate and never stored.
func MsgID(tenant, taskID string, seq int64) string {
	return TenantToken(tenant) + "/" + taskID + ":" + strconv.FormatInt(seq, 10)
}

// parseEventSubject returns the tenant and partition of an event subject.
func parseEventSubject(subj string) (tenant string, p int, err error) {
	rest, ok := strings.CutPrefix(subj, eventsPrefix)
	tok, num, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", 0, fmt.Errorf("cluster: %q is not apollo.events.<tenant>.<partition>", subj)
	}
	if tenant, err = ParseTenantToken(tok); err != nil {
		return "", 0, err
	}
	p, err = strconv.Atoi(num)
	if err != nil || p < 0 || strconv.Itoa(p) != num {
		return "", 0, fmt.Errorf("cluster: %q: partition %q is not a number", subj, num)
	}
	return tenant, p, nil
}

func eventsFilter(p int) string { return eventsPrefix + "*." + strconv.Itoa(p) }
func logSubject(p int) string   { return logPrefix + strconv.Itoa(p) }
func leaseKey(p int) string     { return "p." + strconv.Itoa(p) }
func nodeKey(id string) string  { return "node." + id }
func rpcSubject(p int) string   { return rpcPrefix + strconv.Itoa(p) }

const rpcList = rpcPrefix + "list"

func changeSubject(tenant string, p int) string {
	return changesPrefix + TenantToken(tenant) + "." + strconv.Itoa(p)
}
