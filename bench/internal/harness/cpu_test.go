package harness

import (
	"os"
	"testing"
	"time"
)

// Touching memory the process never used shows in MinorFaults, and
// burning CPU in CPUTime; a process that is gone is an error.
func TestProcStat(t *testing.T) {
	pid := os.Getpid()
	f0, err := MinorFaults(pid)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	mem := make([]byte, size) // fresh pages from the kernel
	for i := 0; i < size; i += 4096 {
		mem[i] = 1
	}
	f1, err := MinorFaults(pid)
	if err != nil {
		t.Fatal(err)
	}
	if f1-f0 < size/4096/2 {
		t.Errorf("touching %d fresh pages took %d minor faults (%d before, %d after)", size/4096, f1-f0, f0, f1)
	}
	// Reading the memory over and over: CPUTime must grow past 20 ms, the
	// grain of two ticks, long before 200 passes (seconds of CPU).
	for pass, x := 0, 0; ; pass++ {
		c, err := CPUTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		if c-c0 >= 20*time.Millisecond {
			break
		}
		if pass == 200 {
			t.Fatalf("CPU time %v after %v and %d passes over %d bytes (sum %d)", c, c0, pass, size, x)
		}
		for i := range mem {
			x += int(mem[i])
		}
	}
	if _, err := MinorFaults(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
