package prefault

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCgroupPaths(t *testing.T) {
	for _, c := range []struct{ name, in, unified, memory string }{
		{"v1 and the unified hierarchy", "9:name=systemd:/\n4:memory:/process_api/49c4\n1:cpu:/\n0::/\n", "/", "/process_api/49c4"},
		{"v2 only", "0::/system.slice/apollo.service\n", "/system.slice/apollo.service", ""},
		{"memory among other controllers", "3:cpu,memory,pids:/docker/abc\n", "", "/docker/abc"},
		{"a name that only contains memory", "3:memoryx:/a\n", "", ""},
		{"damaged lines", "garbage\n0:\n:memory:\n2:memory:relative\n\n", "", ""},
	} {
		u, m := cgroupPaths([]byte(c.in))
		if u != c.unified || m != c.memory {
			t.Errorf("%s: got %q, %q; want %q, %q", c.name, u, m, c.unified, c.memory)
		}
	}
}

func TestParseLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"536870912\n", 536870912, true},
		{"max\n", 0, false},
		{"9223372036854771712\n", 0, false}, // v1's "no limit"
		{"0\n", 0, false},
		{"-1\n", 0, false},
		{"99999999999999999999999\n", 0, false},
		{"12 MB", 0, false},
		{"", 0, false},
	} {
		if n, ok := parseLimit([]byte(c.in)); n != c.want || ok != c.ok {
			t.Errorf("parseLimit(%q) = %d, %v; want %d, %v", c.in, n, ok, c.want, c.ok)
		}
	}
}

func FuzzCgroup(f *testing.F) {
	f.Add([]byte("9:name=systemd:/\n4:memory:/process_api/49c4\n0::/\n"))
	f.Add([]byte("536870912\n"))
	f.Add([]byte("max\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, m := cgroupPaths(data)
		for _, p := range []string{u, m} {
			if p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\n")) {
				t.Fatalf("path %q from %q", p, data)
			}
		}
		if n, ok := parseLimit(data); ok {
			if n <= 0 || n >= noLimit {
				t.Fatalf("limit %d from %q", n, data)
			}
			if back, _ := parseLimit([]byte(strconv.FormatInt(n, 10))); back != n {
				t.Fatalf("limit %d does not read back", n)
			}
		}
	})
}

func TestMemoryCeiling(t *testing.T) {
	c := MemoryCeiling()
	if Available && c <= 0 {
		t.Fatalf("MemoryCeiling() = %d on a system that reports its memory", c)
	}
	t.Logf("memory ceiling: %d MiB", c>>20)
	if want := os.Getenv("PREFAULT_WANT_CEILING"); want != "" && strconv.FormatInt(c, 10) != want {
		t.Fatalf("in a control group limited to %s bytes, MemoryCeiling() = %d", want, c)
	}
}

// A process in a container sees the container's memory, not the host's:
// the test makes a control group limited to 512 MiB (v1 or v2, below its
// own), runs TestMemoryCeiling in it, and wants the ceiling to be the
// limit. It needs to be allowed to make control groups (root, a writable
// hierarchy); elsewhere it is skipped.
func TestMemoryCeilingInAControlGroup(t *testing.T) {
	if !Available {
		t.Skip("Linux only")
	}
	if os.Getenv("PREFAULT_WANT_CEILING") != "" {
		t.Skip("inside the child")
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	unified, memory := cgroupPaths(data)
	const limit = 512 << 20
	name := fmt.Sprintf("apollo-prefault-test-%d", os.Getpid())
	var dir, file string
	switch {
	case memory != "":
		dir, file = filepath.Join("/sys/fs/cgroup/memory", memory, name), "memory.limit_in_bytes"
	case unified != "":
		dir, file = filepath.Join("/sys/fs/cgroup", unified, name), "memory.max"
	default:
		t.Skip("no memory control group for this process")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a control group here: %v", err)
	}
	defer os.Remove(dir)
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Skipf("cannot limit the control group's memory: %v", err)
	}
	// The shell moves itself into the group, then becomes the test binary.
	cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec "$2" -test.run '^TestMemoryCeiling$' -test.v`, "sh", dir, os.Args[0])
	cmd.Env = append(os.Environ(), "PREFAULT_WANT_CEILING="+strconv.Itoa(limit))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("in a control group limited to %d MiB: %v", limit>>20, err)
	}
	if !strings.Contains(string(out), "memory ceiling: 512 MiB") {
		t.Fatalf("the child did not report the limit")
	}
}
