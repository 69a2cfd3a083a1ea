package expect

import (
	"slices"
	"strings"
)

// Cycles returns each cycle of a dependency graph once, as a path that
// starts and ends with the same name: "a -> b -> a" reads "a depends on b,
// which depends on a". names are the graph's nodes in the order people
// wrote them; a cycle starts at its name that comes first. upstream gives
// a node's dependencies; names it returns that are not in names, and a
// node's dependency on itself, are left out (callers report those on
// their own, in their own words).
func Cycles(names []string, upstream func(name string) []string) [][]string {
	const (
		white = iota
		grey
		black
	)
	pos := make(map[string]int, len(names))
	for i, n := range names {
		if _, dup := pos[n]; !dup {
			pos[n] = i
		}
	}
	color := map[string]int{}
	var stack []string
	var cycles [][]string
	reported := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		color[name] = grey
		stack = append(stack, name)
		for _, up := range upstream(name) {
			if _, ok := pos[up]; !ok || up == name {
				continue
			}
			switch color[up] {
			case white:
				visit(up)
			case grey:
				at := slices.Index(stack, up)
				cyc := slices.Clone(stack[at:])
				start := 0
				for k, n := range cyc {
					if pos[n] < pos[cyc[start]] {
						start = k
					}
				}
				cyc = append(cyc[start:], cyc[:start]...)
				sorted := slices.Clone(cyc)
				slices.Sort(sorted)
				if key := strings.Join(sorted, "\x00"); !reported[key] {
					reported[key] = true
					cycles = append(cycles, append(cyc, cyc[0]))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[name] = black
	}
	for _, n := range names {
		if color[n] == white {
			visit(n)
		}
	}
	return cycles
}

// rootCauses walks the upstream graph above job and returns, sorted, the
// jobs that are down and have nothing down above them: the causes that
// the trouble of job (and of every down job between) is an echo of. job
// itself is not asked about. The graph has no cycles (sets refuse them),
// but the walk keeps a visited set anyway, so that it ends on any input.
func rootCauses(job string, upstream func(string) []string, down func(string) bool) []string {
	// above[n] says whether some job above n is down: a memo over the
	// ancestors, so that each is looked at once however many paths lead
	// to it.
	above := map[string]bool{}
	var visit func(n string) bool
	visit = func(n string) bool {
		if v, ok := above[n]; ok {
			return v
		}
		above[n] = false // visiting: a cycle back here adds nothing
		found := false
		for _, u := range upstream(n) {
			if d := down(u); visit(u) || d {
				found = true
			}
		}
		above[n] = found
		return found
	}
	if !visit(job) {
		return nil
	}
	var roots []string
	for n, a := range above {
		if n != job && !a && down(n) {
			roots = append(roots, n)
		}
	}
	slices.Sort(roots)
	return roots
}
