package apiclient

import (
	"go/build"
	"strings"
	"testing"
)

// TestImports keeps the package usable by any Go program: the standard
// library and the root package only.
func TestImports(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && imp != "github.com/apollo-11/apollo" {
			t.Errorf("apiclient imports %s: only the standard library and the root package may be", imp)
		}
	}
}
