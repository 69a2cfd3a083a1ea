package httpapi

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedImports are the packages of this module that httpapi may import
// (docs/architecture.md, "Packages"): the transport mounts handlers and
// translates errors; every component reaches it through an interface that
// cmd/apollo fills. A new import here is a new dependency of the HTTP
// layer: give the reason, or declare the interface instead.
var allowedImports = map[string]string{
	"github.com/apollo-11/apollo":           "the domain",
	"github.com/apollo-11/apollo/apiclient": "the wire types and the one table of codes and statuses",
	"github.com/apollo-11/apollo/audit":     "the audit seam: every authenticated action and refused request is recorded",
	"github.com/apollo-11/apollo/stream":    "the live stream, mounted at GET /api/v1/stream",
}

// TestImports pins httpapi's imports of this module, as `go list` reports
// them.
func TestImports(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for imp := range strings.Lines(string(out)) {
		imp = strings.TrimSpace(imp)
		if imp != "github.com/apollo-11/apollo" && !strings.HasPrefix(imp, "github.com/apollo-11/apollo/") {
			continue
		}
		n++
		if _, ok := allowedImports[imp]; !ok {
			t.Errorf("httpapi imports %s: reach it through an interface that cmd/apollo fills, or add it to allowedImports with the reason", imp)
		}
	}
	if n == 0 {
		t.Fatalf("go list reported no import of this module:\n%s", out)
	}
}
