package web_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/httpapi"
)

// fileExpectations stands in for the server's expectations at the edge of
// the page (cmd/apollo's, which the end-to-end tests there drive): a file
// per tenant, a line with "every: soon" refused at line 3, column 12 as the
// real parser does, and one proposal, for nightly, until it is accepted.
type fileExpectations struct {
	mu       sync.Mutex
	src      string
	accepted bool
}

func (f *fileExpectations) Expectations(string) apiclient.Expectations {
	f.mu.Lock()
	defer f.mu.Unlock()
	return apiclient.Expectations{Source: f.src, Count: strings.Count(f.src, "- job:")}
}

func (f *fileExpectations) PutExpectations(_ context.Context, _ string, src []byte, ifMatch string) ([]apiclient.RuleProblem, error) {
	if strings.Contains(string(src), "every: soon") {
		return []apiclient.RuleProblem{{Pos: "3:12", Line: 3, Col: 12, Message: `job "x": every: "soon" is not a duration`}}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ifMatch != "" && ifMatch != apiclient.FileTag(f.src) {
		return nil, apiclient.Changed("expectations")
	}
	f.src = string(src)
	return nil, nil
}

func (f *fileExpectations) Suggestions(_, job string, _ int) apiclient.SuggestionList {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.accepted || job != "" && job != "nightly" {
		return apiclient.SuggestionList{}
	}
	return apiclient.SuggestionList{Suggestions: []apiclient.Suggestion{{Job: "nightly", Describe: "daily at 02:00", Confidence: 0.93, Runs: 20,
		Schedule: "0 2 * * *", Timezone: "UTC", Grace: "10m0s", YAML: "  - job: nightly\n    schedule: 0 2 * * *\n"}}}
}

func (f *fileExpectations) AcceptSuggestion(_ context.Context, _, job string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.accepted || job != "nightly" {
		return false, nil
	}
	f.accepted = true
	f.src += "  - job: nightly\n    schedule: 0 2 * * *\n"
	return true, nil
}

// The expectations page shows the file in force and the learner's
// proposals; an operator accepts a proposal in one click, and edits the
// file with every problem shown at its line and column, nothing changed
// until it is valid (the rules page's editor is the same one). A viewer
// sees both and can change neither.
func TestExpectationsPageInBrowser(t *testing.T) {
	viewers := tokens{"admin-token": testTokens["admin-token"], "viewer-token": {Name: "watcher", Role: httpapi.RoleViewer}}
	d := newDashboard(t, viewers)
	d.hub.Stop(context.Background())
	x := &fileExpectations{src: "expectations:\n  - job: etl_extract\n    every: 5m\n"}
	d.expect = x
	d.startStream()

	b := newBrowser(t)
	b.signIn(d.srv.URL+"/", "admin-token")
	b.goTo("/expectations")
	b.until("the file in force", text("#expect-source")+`.includes("etl_extract") && `+text("main h2")+`.includes("1 job")`)
	b.until("the proposal", text("#proposals")+`.includes("nightly") && `+text("#proposals")+`.includes("daily at 02:00") && `+text("#proposals")+`.includes("93%")`)
	b.screenshot("expectations")

	// A bad file: its problem at its place, and nothing changed.
	b.do("edit", chromedp.Click(chromedp.CSS("#edit-expectations")))
	b.until("the editor", `document.querySelector("#expect-text")?.value.includes("etl_extract")`)
	run := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("(() => { "+js+"; return true })()")); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run("clear the editor", `const e = document.querySelector("#expect-text"); e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true}))`)
	b.do("a bad file", chromedp.SendKeys(chromedp.CSS("#expect-text"), "expectations:\n  - job: x\n    every: soon\n"),
		chromedp.Click(chromedp.CSS(`form[aria-label="Edit expectations"] button[type=submit]`)))
	b.until("the problem at 3:12", text("#expect-errors")+`.includes("line 3:12") && `+text("#expect-errors")+`.includes("not a duration")`)
	if got := x.Expectations("").Source; !strings.Contains(got, "etl_extract") {
		t.Fatalf("a refused file changed the expectations: %q", got)
	}
	b.do("cancel", chromedp.Click(chromedp.CSS(`form[aria-label="Edit expectations"] button[type=button]`)))

	// One click accepts the proposal.
	b.do("accept", chromedp.Click(chromedp.CSS("#proposals button.accept")))
	b.until("the accepted proposal in force", text("#expect-source")+`.includes("nightly") && !!document.querySelector("#no-proposals")`)

	// Saved by another operator while the editor is open: the save is
	// refused, saying so, and erases nothing; the editor opens again on
	// what is in force.
	b.do("edit", chromedp.Click(chromedp.CSS("#edit-expectations")))
	b.until("the editor", `document.querySelector("#expect-text")?.value.includes("nightly")`)
	b.do("add a job", chromedp.SendKeys(chromedp.CSS("#expect-text"), "  - job: mine\n    every: 1h\n"))
	theirs := x.Expectations("").Source + "  - job: theirs\n    every: 1h\n"
	if _, err := x.PutExpectations(context.Background(), "", []byte(theirs), ""); err != nil {
		t.Fatal(err)
	}
	b.do("save", chromedp.Click(chromedp.CSS(`form[aria-label="Edit expectations"] button[type=submit]`)))
	b.until("refused: changed meanwhile", text("#expect-errors")+`.includes("changed since") && `+text("#expect-errors")+`.includes("read the expectations again")`)
	if got := x.Expectations("").Source; got != theirs {
		t.Fatalf("the other operator's file was saved over: %q", got)
	}
	b.do("cancel", chromedp.Click(chromedp.CSS(`form[aria-label="Edit expectations"] button[type=button]`)))
	b.until("what is in force now", text("#expect-source")+`.includes("theirs")`)

	// The rules page edits its file the same way.
	b.goTo("/rules")
	b.do("edit the rules", chromedp.Click(chromedp.CSS("#edit-rules")))
	b.until("the rules editor", `document.querySelector("#rules-text")?.value.includes("etl_failures")`)
	run("clear the rules editor", `const e = document.querySelector("#rules-text"); e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true}))`)
	b.do("a bad rule", chromedp.SendKeys(chromedp.CSS("#rules-text"), "RULE x task_prefix: \"a\" ON: exploded NOTIFY: console\n"),
		chromedp.Click(chromedp.CSS(`form[aria-label="Edit rules"] button[type=submit]`)))
	b.until("the rule's problem at its place", text("#rules-errors")+`.includes("line 1:")`)
	b.do("cancel", chromedp.Click(chromedp.CSS(`form[aria-label="Edit rules"] button[type=button]`)))
	b.until("the rules in force", text("#rules-table")+`.includes("etl_failures")`)

	// A viewer sees, and is not offered what the role may not do.
	run("sign out", "localStorage.clear()")
	b.signIn(d.srv.URL+"/expectations", "viewer-token")
	b.until("the viewer's page", text("#expect-source")+`.includes("nightly") && `+text("main")+`.includes("Editing needs the operator role") && !document.querySelector("#edit-expectations")`)
}
