package httpapi

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

// A ping names its runs job@ping-<Unix ms>, which must fit a task ID: a
// job name of 238 to 256 bytes, which the route let through as within
// its limit of 256, was refused by the bus with "taskID: 275 bytes, over
// the limit of 256", of a task ID the caller never sent; and a name that
// is not UTF-8 was refused as a bad taskID too. Now the route refuses
// both naming the name, and the longest name it takes is reported, in
// each of two tenants.
func TestPingNameFitsItsRunsID(t *testing.T) {
	t.Parallel()
	sec := newSecured(t, 0)
	longest := strings.Repeat("n", apollo.MaxTaskIDBytes-len(apollo.PingRunID("", 1_800_000_000_000)))
	for _, tenant := range []string{"a", "b"} {
		token := sec.tokens["agent/"+tenant]
		for _, tc := range []struct{ name, want string }{
			{longest + "n", "238 bytes: a ping's job name has at most 237"},
			{longest + strings.Repeat("n", 19), "256 bytes: a ping's job name has at most 237"},
			{"nightly\xff", "not valid UTF-8"},
		} {
			for _, action := range []string{"/start", "", "/fail"} {
				status, body := sec.do(t, "GET", "/ping/"+url.PathEscape(tc.name)+action, token, "")
				var ans struct{ Error apollo.Error }
				json.Unmarshal([]byte(body), &ans)
				if status != 400 || ans.Error.Field != "name" || !strings.Contains(ans.Error.Message, tc.want) {
					t.Errorf("tenant %s: a ping of a %d-byte name%s: %d %s, want 400 naming the name: %s", tenant, len(tc.name), action, status, body, tc.want)
				}
			}
		}
		for _, action := range []string{"/start", ""} {
			if status, body := sec.do(t, "GET", "/ping/"+longest+action, token, ""); status != 200 {
				t.Fatalf("tenant %s: a ping of the longest name%s: %d %s", tenant, action, status, body)
			}
		}
		list, _, err := sec.bus.List(apollo.TaskFilter{Tenant: tenant, Prefix: longest})
		if err != nil || len(list) != 1 || list[0].Status != apollo.StatusSuccess || list[0].Name != longest {
			t.Errorf("tenant %s: the longest name's run: %+v %v, want one success", tenant, list, err)
		}
	}
}
