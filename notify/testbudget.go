package notify

import (
	"fmt"
	"sync"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// testBudget is each tenant's allowance of test messages on one channel
// that has a rate limit. The channel's turns are every tenant's alerts':
// a test must take one (a robot counts every message, and mutes a sender
// past its limit), so one tenant's operator testing again and again spent
// the turns of every tenant's alerts on a shared channel. Now a tenant's
// tests take at most one turn every testEvery, and never a turn alerts
// are waiting for (Dispatcher.test).
type testBudget struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]time.Time // tenant -> when its latest test went out
}

// testEvery is how often a tenant may test a channel whose turns come
// every turn: once a minute, and no more than one turn in five of a
// slower channel. On a DingTalk or WeCom robot (20 a minute) one
// tenant's tests take at most one turn in twenty.
func testEvery(turn time.Duration) time.Duration { return max(time.Minute, 5*turn) }

func newTestBudget(p *pacer) *testBudget {
	if p == nil {
		return nil // no limit: no turns to share
	}
	return &testBudget{every: testEvery(p.every), last: map[string]time.Time{}}
}

// check refuses a test of tenant at now while its latest is less than
// every ago.
func (b *testBudget) check(channel, tenant string, now time.Time) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if last, ok := b.last[tenant]; ok && now.Sub(last) < b.every {
		wait := b.every - now.Sub(last)
		return &apollo.Error{Code: apollo.ETOOMANY, Field: "channel",
			Message: fmt.Sprintf("a tenant may send one test message every %s to channel %s, whose turns are every tenant's alerts'; this tenant's last was %s ago",
				b.every, channel, now.Sub(last).Round(time.Second)),
			Hint: fmt.Sprintf("try again in %s", wait.Round(time.Second)+time.Second)}
	}
	return nil
}

// spend records a test of tenant sent at now.
func (b *testBudget) spend(tenant string, now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.last[tenant] = now
	b.mu.Unlock()
}
