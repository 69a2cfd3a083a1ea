package main

import (
	"net/http"
	"testing"
)

// A rules file whose NOTIFY names a channel that does not serve the
// tenant is refused with its problems listed at their places, as every
// other problem of a rules file is, in both modes: the CLI and the
// dashboard show the list. Before, the three-process bus, which leaves
// the channel check to the alert processes, answered the alert process's
// refusal as one error, with no "errors" list and the place as
// "rules:1:51" in its field; apollo rules apply then printed no problem.
func TestUnknownChannelIsAProblemInEveryMode(t *testing.T) {
	eachMode(t, deployOptions{}, func(t *testing.T, d *deployment, h *hook) {
		d.setEventRules()
		for _, tenant := range tenants {
			var got struct {
				Error  struct{ Code, Field, Message string }
				Errors []struct {
					Pos       string
					Line, Col int
					Message   string
				}
			}
			d.do(tenant, "PUT", "/api/v1/rules", "RULE x task_prefix: \"x_\" ON: failed NOTIFY: hook, nope\n", &got, http.StatusBadRequest)
			if got.Error.Code != "invalid" || got.Error.Message != "the rules have 1 problem(s); nothing was changed" || len(got.Errors) != 1 ||
				got.Errors[0].Pos != "1:51" || got.Errors[0].Message != `rule x notifies unknown channel "nope" (expected a channel from the configuration)` {
				t.Errorf("tenant %s: the refusal is %+v; want the one problem at 1:51, listed", tenant, got)
			}
		}
		d.crash()
		for _, tenant := range tenants {
			d.fail(tenant, tenant+"_load")
		}
		awaitTenants(t, h, "firing", map[string]string{"acme": "acme_failed", "globex": "globex_failed"})
	})
}
