package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/rules"
)

// Command is a change the bus asks of the alert processes: every alert
// process applies it (they all hold the same alerts), and the bus answers
// its client with the first success, or an error once every process that
// got the command refused it (Commander.Do).
type Command struct {
	ID     string `json:"id"`
	Op     string `json:"op"` // ack, silence.add, silence.remove, rules.set, self
	Tenant string `json:"tenant,omitempty"`
	By     string `json:"by,omitempty"`
	// ack: the alert as the bus saw it. Alert processes name episodes
	// independently, so each acks its own alert of the same rule and group.
	AlertID string `json:"alertID,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Group   string `json:"group,omitempty"`

	Silence   *alert.Silence `json:"silence,omitempty"`
	SilenceID string         `json:"silenceID,omitempty"`
	Rules     string         `json:"rules,omitempty"` // rules.set: the whole rules source
	// self: a self-alert the bus raises (Name, Summary), e.g. refused events.
	Name    string `json:"name,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// Reply is an alert process's outcome of a command.
type Reply struct {
	ID      string         `json:"id"`
	Err     *apollo.Error  `json:"error,omitempty"`
	Silence *alert.Silence `json:"silence,omitempty"`
	// Problems are the places in a rules file that the alert process
	// refused (an unknown channel, a window past what is kept), with Err
	// the first of them: the bus answers them as its own check's.
	Problems rules.ErrorList `json:"problems,omitempty"`
}

// ErrNoAlertProcess is returned when no alert process answered in time.
var ErrNoAlertProcess = &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "no alert process answered",
	Hint: "check that `apollo alert` runs against the same Redis (apollo status)"}

// Commander sends commands from the bus and waits for the replies.
type Commander struct {
	c       redis.UniversalClient
	prefix  string
	timeout time.Duration
	stop    func()

	mu      sync.Mutex
	waiting map[string]chan Reply
}

// NewCommander subscribes to the replies; Close unsubscribes.
func NewCommander(ctx context.Context, c redis.UniversalClient, prefix string) (*Commander, error) {
	cm := &Commander{c: c, prefix: prefix, timeout: 5 * time.Second, waiting: map[string]chan Reply{}}
	stop, err := subscribe(ctx, c, prefix+":alert:replies", func(payload string) {
		var r Reply
		if json.Unmarshal([]byte(payload), &r) != nil {
			return
		}
		cm.mu.Lock()
		ch := cm.waiting[r.ID]
		cm.mu.Unlock()
		select {
		case ch <- r: // nil (Do returned): nobody waits
		default: // more replies than processes counted: Do has what it needs
		}
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: subscribing to alert replies: %w", err)
	}
	cm.stop = stop
	return cm, nil
}

// Close stops listening for replies.
func (cm *Commander) Close() { cm.stop() }

// Do publishes cmd and returns the first reply that is a success. An
// error reply waits for the other processes that got the command: in a
// rolling upgrade of the alert processes, or a moment after the leader
// fired an alert, one of them may not hold the alert an ack names yet,
// and its "not found" must not hide the ack the others did. Once every
// process answered an error, or the wait is over, the first error is
// returned; with no reply at all, ErrNoAlertProcess.
func (cm *Commander) Do(ctx context.Context, cmd Command) (Reply, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	cmd.ID = hex.EncodeToString(b[:])
	ch := make(chan Reply, maxRepliers)
	cm.mu.Lock()
	cm.waiting[cmd.ID] = ch
	cm.mu.Unlock()
	defer func() {
		cm.mu.Lock()
		delete(cm.waiting, cmd.ID)
		cm.mu.Unlock()
	}()
	data, err := json.Marshal(cmd)
	if err != nil { // published, it would be ignored, and the wait end as if no alert process ran
		return Reply{}, fmt.Errorf("redisstore: encoding a command: %w", err)
	}
	n, err := cm.c.Publish(ctx, cm.prefix+":alert:commands", data).Result()
	if err != nil {
		return Reply{}, fmt.Errorf("redisstore: publishing a command: %w", err)
	}
	if n == 0 {
		return Reply{}, ErrNoAlertProcess
	}
	t := time.NewTimer(cm.timeout)
	defer t.Stop()
	var refused *Reply
wait:
	for range min(n, maxRepliers) {
		select {
		case r := <-ch:
			if r.Err == nil {
				return r, nil
			}
			if refused == nil {
				refused = &r
			}
		case <-t.C:
			break wait
		case <-ctx.Done():
			return Reply{}, ctx.Err()
		}
	}
	if refused != nil {
		return *refused, refused.Err
	}
	return Reply{}, ErrNoAlertProcess
}

// maxRepliers bounds the replies Do waits for, however many subscribers
// Redis counted (the bus's own tools may subscribe too): a handful of
// alert processes is the design.
const maxRepliers = 16

// Tell publishes cmd without waiting for a reply: for self-alerts, which
// every alert process raises and the dedup lock sends once.
func (cm *Commander) Tell(ctx context.Context, cmd Command) error {
	data, _ := json.Marshal(cmd)
	return cm.c.Publish(ctx, cm.prefix+":alert:commands", data).Err()
}

// ServeCommands applies the bus's commands with handle and publishes the
// replies, until stop is called.
func ServeCommands(ctx context.Context, c redis.UniversalClient, prefix string, handle func(context.Context, Command) Reply) (stop func(), err error) {
	return subscribe(ctx, c, prefix+":alert:commands", func(payload string) {
		var cmd Command
		if json.Unmarshal([]byte(payload), &cmd) != nil {
			return
		}
		r := handle(ctx, cmd)
		r.ID = cmd.ID
		data, _ := json.Marshal(r)
		_ = c.Publish(ctx, prefix+":alert:replies", data).Err()
	})
}
