package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/httpapi"
)

// putRules sends a rules file to PUT /api/v1/rules with a token, as another
// admin's apollo rules set does, and wants 200.
func (d *dashboard) putRules(token, src string) {
	d.t.Helper()
	req, err := http.NewRequest("PUT", d.srv.URL+"/api/v1/rules", strings.NewReader(src))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("PUT /api/v1/rules: HTTP %d", resp.StatusCode)
	}
}

// editRules opens the rules editor and adds a line at its end, without
// saving.
func (b *browser) editRules(line string) {
	b.t.Helper()
	b.do("edit the rules", chromedp.Click(chromedp.CSS("#edit-rules")))
	b.until("the rules editor", `document.querySelector("#rules-text")?.value.includes("etl_failures")`)
	b.do("add a rule", chromedp.Evaluate[chromedp.Void](`(() => { const e = document.querySelector("#rules-text");
		e.value += "\n" + `+jsString(line)+`; e.dispatchEvent(new Event("input", {bubbles: true})); })()`))
}

// Two admins edit the rules: the one who saves last, from an editor
// opened before the other saved, is told the rules changed meanwhile,
// and nothing is changed. The page put its whole file back, so the rule
// the other admin had just added was gone without a word, and alerts it
// was to raise never came. A save of the other tenant's rules is not a
// change of these.
func TestRulesEditedMeanwhileInBrowser(t *testing.T) {
	auth := tokens{
		"admin-token": {Name: "root", Role: httpapi.RoleAdmin},
		"other-admin": {Name: "carol", Role: httpapi.RoleAdmin},
		"b-token":     {Name: "bob", Tenant: "b", Role: httpapi.RoleAdmin},
	}
	d := newDashboard(t, auth)
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/rules", "admin-token")
	b.until("the rules", text("#rules-table")+`.includes("etl_failures")`)

	b.editRules(`RULE mine task_prefix: "mine" ON: failed NOTIFY: console`)
	d.putRules("b-token", `RULE b_rule task_prefix: "b" ON: failed NOTIFY: console`)
	b.do("save", chromedp.Click(chromedp.CSS(`form[aria-label="Edit rules"] button[type=submit]`)))
	b.until("saved: the other tenant's rules did not change these", text("#rules-table")+`.includes("mine")`)

	b.editRules(`RULE mine_too task_prefix: "mine" ON: timeout NOTIFY: console`)
	d.putRules("other-admin", dashboardRules+`RULE mine task_prefix: "mine" ON: failed NOTIFY: console
RULE carols task_prefix: "carol" ON: failed NOTIFY: console
`)
	b.do("save", chromedp.Click(chromedp.CSS(`form[aria-label="Edit rules"] button[type=submit]`)))
	b.until("refused: the rules changed meanwhile, and what to do", text("#rules-errors")+`.includes("changed since") && `+
		text("#rules-errors")+`.includes("read the rules again")`)
	b.screenshot("changed-meanwhile")
	if names := ruleNames(d, ""); !names["carols"] || names["mine_too"] {
		t.Errorf("rules in force %v: want the other admin's carols kept and mine_too not saved over it", names)
	}

	b.do("cancel", chromedp.Click(chromedp.CSS(`form[aria-label="Edit rules"] button[type=button]`)))
	b.until("the rules as they are now", text("#rules-table")+`.includes("carols")`)
	b.editRules(`RULE mine_too task_prefix: "mine" ON: timeout NOTIFY: console`)
	b.until("the editor opens what is in force now", `document.querySelector("#rules-text").value.includes("carols")`)
	b.do("save", chromedp.Click(chromedp.CSS(`form[aria-label="Edit rules"] button[type=submit]`)))
	b.until("saved over the rules as they are now", text("#rules-table")+`.includes("mine_too")`)
	if names := ruleNames(d, ""); !names["carols"] || !names["mine_too"] {
		t.Errorf("rules in force %v: want carols and mine_too", names)
	}
	if names := ruleNames(d, "b"); len(names) != 1 || !names["b_rule"] {
		t.Errorf("tenant b's rules %v: want b_rule alone", names)
	}
}

// ruleNames are the names of the rules in force for tenant.
func ruleNames(d *dashboard, tenant string) map[string]bool {
	names := map[string]bool{}
	for _, r := range d.alerts.Rules(tenant) {
		names[r.Name] = true
	}
	return names
}
