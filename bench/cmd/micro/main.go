// Command micro runs the micro-benchmarks that live beside the code (go
// test -bench in the main module) that the design's figures rest on: the
// bus's Publish and memory per task, the write-ahead log per fsync policy
// and its replay, the event decoder beside encoding/json, metrics
// aggregation, rule evaluation and the notification pipeline. It repeats
// each (-count) and prints one markdown table with the median and spread of
// every figure a benchmark reports.
//
//	go run ./cmd/micro               # -count 3, default benchtime
//	go run ./cmd/micro -short        # each benchmark a few iterations (CI)
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// suite is what is run: package, benchmark regexp, why it is here, and
// -benchtime when not go's default, in a full run and in a smoke run
// (-short: 10x unless said).
var suite = []struct {
	pkg, bench, why, benchtime, short string
	shortArgs                         []string // after the package in a smoke run: the test binary's own flags
}{
	{"./bus", "^BenchmarkPublish$", "decisions + WAL append + per-task queues, in process", "", "", nil},
	{"./bus", "^BenchmarkMemoryPerTask$", "memory per tracked task (target ≤ 512 B)", "", "", nil},
	{"./wal", "^BenchmarkAppend", "WAL append per fsync policy, one writer and batches", "", "", nil},
	{"./wal", "^BenchmarkReplay$", "recovery replay (target ≥ 1M records/s)", "", "", nil},
	{"./httpapi", "^BenchmarkDecode$", "the event decoder beside encoding/json", "", "", nil},
	{"./metrics", "^Benchmark(Apply|Rolling)$", "aggregation per change; the O(1) rolling minute", "", "", nil},
	{"./rules", "^BenchmarkEval$", "one rule expression over one row", "", "", nil},
	{"./expect", "^BenchmarkTick100k$", "what expectations of 100 000 jobs add to one evaluation cycle (target ≤ 10 ms)", "3000x", "2000x", nil},
	{"./notify", "^BenchmarkSend$", "handing a notification to the delivery pipeline", "", "", nil},
	{"./cmd/apollo", "^BenchmarkCheckpointPause$", "what a checkpoint holds every decision for, per task in memory (200 000 tasks)", "5x", "1x", []string{"-args", "-recovery.events=20000"}},
	{"./httpapi", "^BenchmarkFanout$", "1 000 stream clients at 10 000 changes/s: latency percentiles, CPU and heap per client (docs/stream.md explains the cases)", "50000x", "2000x", nil}, // enough changes for the percentiles to exist
}

func main() {
	root := flag.String("root", "..", "repository root")
	count := flag.Int("count", 3, "repeats of each benchmark (go test -count)")
	benchtime := flag.String("benchtime", "", "go test -benchtime (default: go's 1s)")
	short := flag.Bool("short", false, "smoke run: each benchmark 10 iterations, once")
	flag.Parse()
	if *short {
		*count, *benchtime = 1, "10x"
	}
	fmt.Println("## Micro-benchmarks beside the code")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", strings.TrimSpace("go run ./cmd/micro "+strings.Join(os.Args[1:], " ")))
	fmt.Printf("`go test -run '^$' -bench REGEXP -benchmem -count %d` in each package (the main module), parsed: the median of the %d repeats, with the spread (min–max) where it differs by more than 5%%. Custom units are what the benchmark reports itself (events/s, B/task, records/s…).\n\n", *count, *count)
	fmt.Println("| package | benchmark | ns/op | other figures (median) | B/op | allocs/op | why it is here |")
	fmt.Println("|---|---|---|---|---|---|---|")
	failed := false
	seen := map[string]*bench{}
	for _, s := range suite {
		args := []string{"test", "-run", "^$", "-bench", s.bench, "-benchmem", "-count", strconv.Itoa(*count)}
		switch {
		case *short && s.short != "":
			args = append(args, "-benchtime", s.short)
		case *benchtime != "":
			args = append(args, "-benchtime", *benchtime)
		case s.benchtime != "":
			args = append(args, "-benchtime", s.benchtime)
		}
		args = append(args, s.pkg)
		if *short {
			args = append(args, s.shortArgs...)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = *root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		fmt.Fprintf(os.Stderr, "micro: go %s\n", strings.Join(args, " "))
		out, err := cmd.Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "micro: %s %s: %v\n%s%s", s.pkg, s.bench, err, out, stderr.Bytes())
			failed = true
			continue
		}
		why := s.why
		for _, b := range parse(out) {
			seen[b.name] = b
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(s.pkg, "./"), b.name,
				b.figure("ns/op"), b.others(), b.figure("B/op"), b.figure("allocs/op"), why)
			why = "″"
		}
	}
	fmt.Println()
	if b := seen["MemoryPerTask"]; b != nil && len(b.vals["bytes/task"]) > 0 {
		v := b.median("bytes/task")
		fmt.Printf("Target: ≤ 512 bytes of memory per tracked task — %s (%.0f B)\n", verdict(v <= 512), v)
	}
	if b := seen["Replay"]; b != nil && len(b.vals["records/s"]) > 0 {
		v := b.median("records/s")
		fmt.Printf("Target: recovery replays ≥ 1 000 000 log events per second (the log alone) — %s (%.1fM records/s)\n", verdict(v >= 1e6), v/1e6)
	}
	if b := seen["Tick100k"]; b != nil && len(b.vals["ns/op"]) > 0 {
		v, cpu := b.median("ns/op"), b.median("cpu-ns/op")
		fmt.Printf("Target: expectations of 100 000 jobs add ≤ 10 ms to an evaluation cycle — %s (%.2f ms per tick, %.2f ms of CPU)\n", verdict(v <= 10e6), v/1e6, cpu/1e6)
	}
	if failed {
		os.Exit(1)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func (b *bench) median(unit string) float64 {
	s := slices.Clone(b.vals[unit])
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

type bench struct {
	name  string
	order []string
	vals  map[string][]float64
}

// parse reads go test's benchmark lines: name, iterations, then value/unit pairs.
func parse(out []byte) []*bench {
	var list []*bench
	byName := map[string]*bench{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		b := byName[name]
		if b == nil {
			b = &bench{name: strings.TrimPrefix(name, "Benchmark"), vals: map[string][]float64{}}
			byName[name] = b
			list = append(list, b)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			unit := f[i+1]
			if _, ok := b.vals[unit]; !ok {
				b.order = append(b.order, unit)
			}
			b.vals[unit] = append(b.vals[unit], v)
		}
	}
	return list
}

func (b *bench) figure(unit string) string {
	xs := b.vals[unit]
	if len(xs) == 0 {
		return "—"
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	med := b.median(unit)
	txt := num(med)
	if lo, hi := s[0], s[len(s)-1]; med > 0 && (hi-lo)/med > 0.05 {
		txt += " (" + num(lo) + "–" + num(hi) + ")"
	}
	return txt
}

func (b *bench) others() string {
	var parts []string
	for _, u := range b.order {
		switch u {
		case "ns/op", "B/op", "allocs/op":
			continue
		}
		parts = append(parts, b.figure(u)+" "+u)
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
