//go:build unix

package sched

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apollo sched check asks the host about each distinct program and dir
// once, however many jobs name them, and still reports the problem at
// every job that has it. Before, it searched the PATH for every job: a
// generated file of 250 000 jobs running a few programs took 56 s and
// 1.1 GB to check.
func TestCheckProgramsAsksOncePerProgram(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	d1, d2 := filepath.Join(tmp, "d1"), filepath.Join(tmp, "d2")
	for _, d := range []string{d1, d2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d1, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Each kind of job, repeated: a program in the PATH, one that is in no
	// PATH, the same found in a job's own PATH, a relative path from two
	// dirs (there in one, not in the other), an absolute path, and a dir
	// that does not exist.
	kinds := []struct {
		fields  string
		problem string // in the issue of each such job; "" none
	}{
		{`command: ["true"]`, ""},
		{`command: [no_such_program_xyz]`, `program "no_such_program_xyz" not found in the PATH (`},
		{`command: [no_such_program_xyz], env: {PATH: "/usr/bin:/bin"}`, `program "no_such_program_xyz" not found in the PATH of its env (/usr/bin:/bin)`},
		{`command: [sh, -c, "true"], env: {PATH: "/usr/bin:/bin"}`, ""},
		{fmt.Sprintf(`command: [./tool], dir: %q`, d1), ""},
		{fmt.Sprintf(`command: [./tool], dir: %q`, d2), `"./tool" does not exist`},
		{`command: [/bin/sh, -c, "true"]`, ""},
		{fmt.Sprintf(`command: ["true"], dir: %q`, filepath.Join(tmp, "nodir")), `does not exist`},
	}
	const each = 300
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range each {
		for k, kind := range kinds {
			fmt.Fprintf(&b, "  - {name: j%d_%d, schedule: \"@daily\", %s}\n", k, i, kind.fields)
		}
	}
	f, err := Parse("jobs.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	programs, stats := map[string]int{}, map[string]int{}
	probe := hostProbe{
		program: func(name, dir string, env []string) (string, string) {
			programs[fmt.Sprint(name, dir, env)]++
			return programProblem(name, dir, env)
		},
		stat: func(dir string) (fs.FileInfo, error) {
			stats[dir]++
			return os.Stat(dir)
		},
	}
	err = f.checkPrograms(probe)
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("checkPrograms: %v, want a *FileError", err)
	}
	// Distinct questions: true, no_such (own PATH), no_such and sh (env
	// PATH), ./tool in d1 and in d2, /bin/sh; a job in a dir that does
	// not exist asks nothing of its program.
	if n := lookups(programs); n != 7 {
		t.Errorf("%d lookups of programs for %d jobs, want 7 (one per distinct program): %v", n, each*len(kinds), programs)
	}
	if n := lookups(stats); n != 3 {
		t.Errorf("%d stats of dirs, want 3 (d1, d2, nodir): %v", n, stats)
	}
	got := map[string]int{}
	for _, is := range fe.Issues {
		var k, i int
		if _, err := fmt.Sscanf(is.Job, "j%d_%d", &k, &i); err != nil || k >= len(kinds) {
			t.Fatalf("issue about job %q", is.Job)
		}
		if kinds[k].problem == "" || !strings.Contains(is.Message, kinds[k].problem) {
			t.Fatalf("job %s (%s): %q, want %q", is.Job, kinds[k].fields, is.Message, kinds[k].problem)
		}
		got[kinds[k].fields]++
	}
	for _, kind := range kinds {
		if want := each * min(len(kind.problem), 1); got[kind.fields] != want {
			t.Errorf("jobs with %s: %d issues, want %d", kind.fields, got[kind.fields], want)
		}
	}
}

// lookups is the total of counts.
func lookups(counts map[string]int) (n int) {
	for _, c := range counts {
		n += c
	}
	return n
}
