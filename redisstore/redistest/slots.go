package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// SlotAudit is a go-redis hook that records every transaction (MULTI …
// EXEC) and every script (EVAL, EVALSHA) whose keys are not all in one
// Redis Cluster slot: on a Cluster, Redis refuses it (CROSSSLOT), and
// go-redis refuses a transaction across slots before sending it. Keys
// are in one slot when their hash tags (the text in the first {…}, or
// the whole key without one) are equal; two different tags may share a
// slot by chance, which the code must not count on, so they count as
// two. Client installs it on the test's client and fails the test on
// what it recorded; it is the check that runs without a Cluster (the
// tests have none), on every command of every test.
type SlotAudit struct {
	mu  sync.Mutex
	bad []string
}

var _ redis.Hook = (*SlotAudit)(nil)

// DialHook implements redis.Hook.
func (a *SlotAudit) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

// ProcessHook implements redis.Hook.
func (a *SlotAudit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a.check([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook: a transaction comes here
// wrapped in MULTI and EXEC.
func (a *SlotAudit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		a.check(cmds)
		return next(ctx, cmds)
	}
}

// Crossed returns what crossed slots, one line each.
func (a *SlotAudit) Crossed() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bad...)
}

func (a *SlotAudit) check(cmds []redis.Cmder) {
	var tx []string // the keys of the transaction open, nil outside one
	var txCmds []string
	in := false
	for _, cmd := range cmds {
		switch name := strings.ToLower(cmd.Name()); name {
		case "multi":
			in, tx, txCmds = true, nil, nil
		case "exec":
			if in {
				a.one("MULTI "+strings.Join(txCmds, " ")+" EXEC", tx)
			}
			in = false
		default:
			keys := commandKeys(cmd)
			if name == "eval" || name == "evalsha" || name == "eval_ro" || name == "evalsha_ro" {
				a.one(name+" "+fmt.Sprint(cmd.Args()[1])[:min(12, len(fmt.Sprint(cmd.Args()[1])))], keys)
			}
			if in {
				tx = append(tx, keys...)
				txCmds = append(txCmds, name)
			}
		}
	}
}

// one records what if keys are not in one slot.
func (a *SlotAudit) one(what string, keys []string) {
	for _, k := range keys[min(1, len(keys)):] {
		if HashTag(k) != HashTag(keys[0]) {
			a.mu.Lock()
			a.bad = append(a.bad, fmt.Sprintf("%s: keys %q and %q are in different slots", what, keys[0], k))
			a.mu.Unlock()
			return
		}
	}
}

// HashTag is what Redis Cluster hashes of key: the text in its first
// {…} when that is not empty, else the whole key.
func HashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end]
		}
	}
	return key
}

// commandKeys returns the keys a command names, for the commands this code
// sends: the declared keys of a script, every argument of the multi-key
// commands, none of a command without keys (PUBLISH names a channel),
// and the first argument of any other.
func commandKeys(cmd redis.Cmder) []string {
	args := cmd.Args()
	str := func(v any) string { return fmt.Sprint(v) }
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) < 3 {
			return nil
		}
		n, err := strconv.Atoi(str(args[2]))
		if err != nil || 3+n > len(args) {
			return nil
		}
		keys := make([]string, n)
		for i := range n {
			keys[i] = str(args[3+i])
		}
		return keys
	case "del", "unlink", "exists", "touch", "mget", "watch", "sunion", "sinter", "sdiff":
		keys := make([]string, 0, len(args)-1)
		for _, v := range args[1:] {
			keys = append(keys, str(v))
		}
		return keys
	case "publish", "spublish", "subscribe", "psubscribe", "ping", "time", "script", "client", "hello", "info",
		"select", "scan", "keys", "dbsize", "flushdb", "command", "auth", "cluster", "readonly", "echo", "quit":
		return nil
	}
	if len(args) < 2 {
		return nil
	}
	return []string{str(args[1])}
}
