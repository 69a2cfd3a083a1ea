package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
)

// Inhibit rules count as rules: GET /api/v1/rules lists them (before, its
// rules array held only RULEs, so apollo rules list showed a tenant whose
// only rules were INHIBITs as having none), and a PUT of a body without
// rules is refused while a tenant runs inhibit rules only (before, the
// guard counted RULEs alone, and an empty body removed them with 200).
// The refusal holds after kill -9.
func TestInhibitRulesAreRulesToTheAPI(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		src := map[string]string{
			"acme":   "INHIBIT acme_quiet SOURCE: rule=acme_down TARGET: task_prefix=\"acme_\"\n",
			"globex": "RULE globex_failed task_prefix: \"globex_\" ON: failed NOTIFY: hook\n",
		}
		for _, tenant := range tenants {
			d.do(tenant, "PUT", "/api/v1/rules", src[tenant], nil, http.StatusOK)
		}
		var e struct {
			Error struct{ Code, Field, Message string }
		}
		d.do("acme", "PUT", "/api/v1/rules", "# nothing\n", &e, http.StatusBadRequest)
		if e.Error.Field != "rules" || !strings.Contains(e.Error.Message, "1 run now") {
			t.Errorf("the refusal: %+v, want field rules and the one inhibit rule counted", e.Error)
		}
		d.crash()
		var set apiclient.RuleSet
		d.do("acme", "GET", "/api/v1/rules", "", &set, http.StatusOK)
		if set.Source != src["acme"] || len(set.Rules) != 0 || len(set.Inhibits) != 1 ||
			set.Inhibits[0].Name != "acme_quiet" || set.Inhibits[0].Kind != "inhibit" || !strings.HasPrefix(set.Inhibits[0].Text, "INHIBIT acme_quiet ") {
			b, _ := json.Marshal(set)
			t.Errorf("acme's rules after kill -9: %s; want its inhibit rule listed", b)
		}
		d.do("acme", "PUT", "/api/v1/rules", "", nil, http.StatusBadRequest)
		set = apiclient.RuleSet{}
		d.do("globex", "GET", "/api/v1/rules", "", &set, http.StatusOK)
		if set.Source != src["globex"] || len(set.Rules) != 1 || len(set.Inhibits) != 0 {
			t.Errorf("globex's rules after kill -9: %+v", set)
		}
		// Meant: the marker removes them, and only acme's.
		d.do("acme", "PUT", "/api/v1/rules", "# apollo: empty\n", nil, http.StatusOK)
		d.do("globex", "GET", "/api/v1/rules", "", &set, http.StatusOK)
		if set.Source != src["globex"] {
			t.Errorf("globex's rules after acme emptied its own: %q", set.Source)
		}
		d.fail("globex", "globex_job")
		awaitTenants(t, h, "firing", map[string]string{"globex": "globex_failed"})
	})
}
