package main

import (
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/notify/webhook"
)

// On a channel with a rate limit shared by two tenants, one tenant's
// operator testing it again and again spends no more than one turn a
// minute: the tests after the first are refused at once (429, saying the
// budget and when to try again), where before each waited for its turn
// and went out, taking the turns of every tenant's alerts. The other
// tenant's alert and its own test still go out.
func TestOneTenantsTestsDoNotSpendTheChannelsTurns(t *testing.T) {
	endToEnd(t)
	h := newHook(t)
	d := startDeployment(t, false, h, deployOptions{hook: "    rate_per_minute: 60\n"})
	d.setEventRules()
	var ans apiclient.ChannelTest
	d.do("acme", "POST", "/api/v1/channels/hook/test", "", &ans, 200)
	if ans.Attempt.Outcome != "sent" {
		t.Fatalf("acme's first test: %+v", ans.Attempt)
	}
	for range 5 {
		var e struct{ Error apollo.Error }
		d.do("acme", "POST", "/api/v1/channels/hook/test", "", &e, 429)
		if e.Error.Code != apollo.ETOOMANY || !strings.Contains(e.Error.Message, "one test message every 1m0s to channel hook") ||
			!strings.HasPrefix(e.Error.Hint, "try again in ") {
			t.Fatalf("acme's next test: %+v; want too_many naming the budget and when to try again", e.Error)
		}
	}
	d.fail("globex", "globex_load")
	d.do("globex", "POST", "/api/v1/channels/hook/test", "", &ans, 200)
	if ans.Attempt.Outcome != "sent" || ans.Attempt.Tenant != "globex" {
		t.Fatalf("globex's test: %+v", ans.Attempt)
	}
	tests, fired := map[string]int{}, false
	for len(tests) < 2 || !fired {
		p := h.await(t, 30*time.Second, "globex's firing and the tests", func(webhook.ApolloPayload) bool { return true })
		switch {
		case string(p.Kind) == "test":
			tests[p.Alert.Tenant]++
		case p.Kind == apollo.NotifyFiring && p.Alert.Tenant == "globex":
			fired = true
		}
	}
	if tests["acme"] != 1 || tests["globex"] != 1 {
		t.Errorf("tests received %v, want one of each tenant", tests)
	}
}
