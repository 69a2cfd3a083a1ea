package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo/bench/internal/harness"
)

// pairs compares the replay of two builds side by side: this checkout's
// build writes one log of n new tasks and is killed, then each round
// copies the data directory twice and starts both builds at once, one on
// each copy, so that both replay under the same load of the machine. A
// replay's CPU is the process's at its "is up" line; the figure to read
// is the ratio within each round (other ÷ this), whose median is printed.
//
// keep, when set, is where the killed log is copied for profiling by hand
// (perf record of `apollo server --data keep/data --config keep/apollo.yaml`).
func pairs(bin, other string, n, per, rounds int, keep string, apart bool) error {
	p, err := harness.Start(bin, harness.Options{Args: []string{"server", "--fsync", "off"}, Config: scaleConfig})
	if err != nil {
		return err
	}
	defer p.Remove()
	if err := writeRuns(p.URL(), n, per); err != nil {
		p.Kill()
		return err
	}
	p.Kill()
	if keep != "" {
		if err := copyDir(p.Dir, keep); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "scale: the killed log of %d events is in %s\n", n, keep)
	}
	fmt.Printf("## Replay side by side\n\nCommand: `go run ./cmd/scale -against %s -repeat %d -events %d -per %d -apart=%v`\n\n", other, rounds, n, per, apart)
	how := "at the same time"
	if apart {
		how = "one after the other, taking turns to go first"
	}
	fmt.Printf("One log of %d events, %d to a task, written by this checkout's build and killed; each round, both builds replay a copy of it %s. Load average before: %s.\n\n", n, per, how, harness.LoadAvg())
	fmt.Println("| round | this: replay s | this: events/s | this: CPU s | other: replay s | other: CPU s | CPU other ÷ this | replay s other ÷ this |\n|---|---|---|---|---|---|---|---|")
	var cpuRatios, secRatios []float64
	for round := range rounds {
		res, errs := replayRound([2]string{bin, other}, p.Dir, n, apart, round%2 == 1)
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		cr, sr := res[1].cpu/res[0].cpu, res[1].seconds/res[0].seconds
		cpuRatios, secRatios = append(cpuRatios, cr), append(secRatios, sr)
		fmt.Printf("| %d | %.3f | %.0f | %.2f | %.3f | %.2f | %.2f | %.2f |\n", round+1, res[0].seconds, float64(n)/res[0].seconds, res[0].cpu, res[1].seconds, res[1].cpu, cr, sr)
		fmt.Fprintf(os.Stderr, "scale: round %d: CPU other/this %.2f, replay other/this %.2f\n", round+1, cr, sr)
	}
	cm, clo, chi := harness.Median(cpuRatios)
	sm, slo, shi := harness.Median(secRatios)
	fmt.Printf("\nMedian over the rounds: CPU other ÷ this %.2f (%.2f–%.2f); replay seconds other ÷ this %.2f (%.2f–%.2f). Load average after: %s.\n",
		cm, clo, chi, sm, slo, shi, harness.LoadAvg())
	return nil
}

type replayed struct{ seconds, cpu float64 }

// replayRound has each of bins replay its own copy of the killed log in
// dir: both at once, or one after the other (apart; the second first when
// swap), and removes the copies after.
func replayRound(bins [2]string, dir string, n int, apart, swap bool) (res [2]replayed, errs [2]error) {
	var dirs [2]string
	for i := range bins {
		d, err := os.MkdirTemp("", "apollo-bench-pair-")
		if err == nil {
			defer os.RemoveAll(d)
			err = copyDir(dir, d)
		}
		if err != nil {
			errs[i] = err
			return res, errs
		}
		dirs[i] = d
	}
	if apart {
		order := []int{0, 1}
		if swap {
			order = []int{1, 0}
		}
		for _, i := range order {
			res[i], errs[i] = replay(bins[i], dirs[i], n)
		}
		return res, errs
	}
	var wg sync.WaitGroup
	for i := range bins {
		wg.Go(func() { res[i], errs[i] = replay(bins[i], dirs[i], n) })
	}
	wg.Wait()
	return res, errs
}

// replay starts bin on dir, which holds a killed log of n events, and
// reads what its recovery took at its "is up" line.
func replay(bin, dir string, n int) (replayed, error) {
	var r replayed
	p, err := harness.Start(bin, harness.Options{Args: []string{"server", "--fsync", "off"}, Config: scaleConfig, Dir: dir, Wait: 5 * time.Minute})
	if err != nil {
		return r, err
	}
	defer p.Kill()
	cpu, err := harness.CPUTime(p.PID())
	if err != nil {
		return r, err
	}
	m, err := harness.Scrape(p.URL())
	if err != nil {
		return r, err
	}
	if m["apollo_recovery_events"] < float64(n) {
		return r, fmt.Errorf("%s replayed %.0f events of %d", bin, m["apollo_recovery_events"], n)
	}
	r.seconds, r.cpu = m["apollo_recovery_seconds"], cpu.Seconds()
	return r, nil
}

// copyDir copies the data directory of a killed server (its log and its
// config) into dst.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	args := []string{"-a"}
	for _, e := range entries {
		args = append(args, filepath.Join(src, e.Name()))
	}
	out, err := exec.Command("cp", append(args, dst)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
