//go:build unix

package agent

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/apollo-11/apollo"
)

// holderEnv names the spool directory that TestSpoolHolder, run as a
// second process, holds.
const holderEnv = "AGENT_TEST_SPOOL_HOLDER"

// TestSpoolHolder is not a test: TestSpoolDirIsForOneProcess runs the
// test binary as another process that opens a Client on a spool directory
// and holds it until killed.
func TestSpoolHolder(t *testing.T) {
	dir := os.Getenv(holderEnv)
	if dir == "" {
		t.Skip("a helper process of TestSpoolDirIsForOneProcess")
	}
	if _, err := New("http://127.0.0.1:1", WithSpoolDir(dir)); err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("holding\n")
	select {} // until killed
}

// Two processes on one spool directory would send and delete each
// other's files (an overlapping cron run of the same Go job, say): the
// second is refused with conflict, as a second Client of one process is,
// and a holder killed with kill -9 frees the directory. Before, only
// Clients of one process were kept apart.
//
// Not parallel: between its fork and its exec the holder's child holds a
// copy of every descriptor this process has open, the spool locks of
// other tests' Clients among them, and a lock one of them closes then is
// still held until the exec: a test that closes a Client and opens the
// next on its directory at that moment would be refused.
func TestSpoolDirIsForOneProcess(t *testing.T) {
	dir := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^TestSpoolHolder$")
	holder.Env = append(os.Environ(), holderEnv+"="+dir)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "holding\n" {
		t.Fatalf("the holder said %q (%v)", line, err)
	}

	_, err = New("http://127.0.0.1:1", WithSpoolDir(dir))
	if apollo.ErrorCode(err) != apollo.ECONFLICT {
		t.Fatalf("a Client on a directory another process holds: %v, want conflict", err)
	}

	holder.Process.Kill() // SIGKILL: no Close, no clean-up
	holder.Wait()
	c, err := New("http://127.0.0.1:1", WithSpoolDir(dir))
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	c.Close(context.Background())
}
