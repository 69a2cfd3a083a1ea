//go:build unix

package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// spoolFullChild, set in the environment, makes the test binary the
// reporter of TestSpoolOnAFullDisk: "URL DIR TOKEN EVENTS FSIZE".
const spoolFullChild = "APOLLO_AGENT_SPOOL_FULL_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(spoolFullChild); args != "" {
		os.Exit(spoolFullReporter(strings.Fields(args)))
	}
	os.Exit(m.Run())
}

// spoolFullReporter reports events with a file size limit on the process
// (a disk that fills up), one line each on stdout: "ok ID" when the SDK
// took it, "refused ID: why" when it said no; then "close: ERR|ok".
func spoolFullReporter(args []string) int {
	events, _ := strconv.Atoi(args[3])
	fsize, _ := strconv.ParseUint(args[4], 10, 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: fsize, Max: fsize}); err != nil {
		fmt.Println("setrlimit:", err)
		return 3
	}
	c, err := New(args[0], WithSpoolDir(args[1]), WithToken(args[2]), WithBatchSize(1), WithBufferSize(1),
		WithClock(apollo.NewFakeClock(t0)), quietLogger())
	if err != nil {
		fmt.Println("new:", err)
		return 3
	}
	for i := 1; i <= events; i++ {
		id := fmt.Sprintf("%s-%d", args[2], i)
		if err := c.Task(id, "job").Running(); err != nil {
			fmt.Printf("refused %s: %v\n", id, err)
		} else {
			fmt.Printf("ok %s\n", id)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the server is down: what memory holds goes to disk now
	if err := c.Close(ctx); err != nil {
		fmt.Printf("close: %v\n", err)
	} else {
		fmt.Println("close: ok")
	}
	return 0
}

// TestSpoolOnAFullDisk: a reporter whose spool directory fills up (here a
// file size limit on its process, so that writes fail with EFBIG as on a
// full disk) refuses new events with an error saying so, and loses none it
// took: every event it said ok to either reaches the server from the spool
// through the next process, or is counted by Close as not delivered.
// Two tenants share the directory, one after the other.
func TestSpoolOnAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts reporter processes: skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	srv := newProtocolServer(t)
	srv.down()
	reported := map[string][]string{}
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		// 4 KiB a file: tenant a's first file fills; tenant b starts new files.
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %d %d", spoolFullChild, srv.URL(), dir, tenant, 200, 4096))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s's reporter: %v\n%s", tenant, err, out)
		}
		var ok, refused []string
		closeLine := ""
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			switch f := strings.Fields(sc.Text()); {
			case len(f) >= 2 && f[0] == "ok":
				ok = append(ok, f[1])
			case len(f) >= 2 && f[0] == "refused":
				refused = append(refused, sc.Text())
			case len(f) >= 1 && f[0] == "close:":
				closeLine = sc.Text()
			default:
				t.Fatalf("%s's reporter wrote %q", tenant, sc.Text())
			}
		}
		if len(refused) == 0 || len(ok) == 0 {
			t.Fatalf("%s: %d events taken, %d refused; want both (is the limit hit?)\n%s", tenant, len(ok), len(refused), out)
		}
		if !strings.Contains(refused[0], "file too large") || !strings.Contains(refused[0], "free space on its disk") {
			t.Errorf("%s: a refusal does not say why: %s", tenant, refused[0])
		}
		if closeLine != "close: ok" {
			t.Errorf("%s: %s", tenant, closeLine)
		}
		reported[tenant] = ok
	}

	srv.up()
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		c := newTestClient(t, srv.URL(), WithSpoolDir(dir), WithToken(tenant))
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
		err := c.Flush(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		closeNow(t, c, 0)
		if st := c.Stats(); st.Dropped != 0 {
			t.Errorf("%s: %d damaged events in the spool: %+v", tenant, st.Dropped, st)
		}
		for _, id := range reported[tenant] {
			if got := srv.storedFor(id); len(got) != 1 {
				t.Errorf("%s: %s was taken by the SDK but never reached the server", tenant, id)
			}
		}
	}
	if n, want := srv.storedCount(), len(reported["tenant-a"])+len(reported["tenant-b"]); n != want {
		t.Errorf("the server stored %d events, want the %d taken", n, want)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("files left: %v", files)
	}
}
