package notify

import (
	"context"
	"sync"
	"time"
)

// Turns spaces the attempts of a channel that several processes send to
// (the alert processes of the three-process mode, each sending what its
// dedup lock gave it): a robot counts every message it gets, so a limit
// of N a minute kept by each process alone lets two of them send 2N, and
// DingTalk mutes the robot. Each process keeps its own pace as well, and
// takes a turn here when that allows an attempt.
type Turns interface {
	// Take takes channel's turn at now and returns 0 when no process took
	// one less than every ago; else it takes nothing and returns how long
	// until the turn is free.
	Take(ctx context.Context, channel string, every time.Duration, now time.Time) (time.Duration, error)
}

// pacer spaces a channel's messages at least every apart, counting from
// when each attempt really started. It is a token bucket of size one, but
// keyed on the send time rather than the reservation time: a lane that was
// late to send (a slow attempt, a busy machine) cannot then send two within
// one interval. DingTalk counts any 60 seconds and mutes a robot for ten
// minutes past 20, so a limit of N a minute must mean at most N in every
// 60-second window, and a bucket that allowed a burst of N would not.
type pacer struct {
	every time.Duration
	mu    sync.Mutex
	next  time.Time // the earliest time the next attempt may start
}

func newPacer(perMinute int) *pacer {
	if perMinute <= 0 {
		return nil
	}
	return &pacer{every: time.Minute / time.Duration(perMinute)}
}

// delay is how long to wait from now before the next attempt may start.
func (p *pacer) delay(now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(0, p.next.Sub(now))
}

// started notes an attempt that started at t.
func (p *pacer) started(t time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if n := t.Add(p.every); n.After(p.next) {
		p.next = n
	}
	p.mu.Unlock()
}
