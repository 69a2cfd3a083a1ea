package stream

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

// indexGroups makes one group per filter spec "prefix" or "prefix|mask",
// where mask selects statuses as streamFilter.statuses does.
func indexGroups(specs []string) []*group {
	gs := make([]*group, len(specs))
	for i, s := range specs {
		p, mask, _ := strings.Cut(s, "|")
		var st uint8
		fmt.Sscan(mask, &st)
		gs[i] = &group{key: fmt.Sprint(i), f: streamFilter{prefix: p, statuses: st, types: wantTasks}}
	}
	return gs
}

// bruteMatch is what the index replaces: every group's filter, tested.
func bruteMatch(gs []*group, name, id string, st apollo.Status) []string {
	var out []string
	for _, g := range gs {
		if g.f.matchTask(name, id, 1<<st) {
			out = append(out, g.key)
		}
	}
	slices.Sort(out)
	return out
}

func indexMatch(x *taskIndex, name, id string, st apollo.Status) []string {
	var out []string
	for _, g := range x.match(nil, name, id, 1<<st) {
		out = append(out, g.key)
	}
	slices.Sort(out)
	return out
}

func TestTaskIndex(t *testing.T) {
	t.Parallel()
	gs := indexGroups([]string{"", "b", "batch_", "batch_", "batch_1", "c7", "batch_|4", "x|2", "batch_1-2026"})
	x := newTaskIndex()
	for _, g := range gs {
		x.add(g)
	}
	tests := []struct {
		name, id string
		st       apollo.Status
		want     string // group keys, sorted
	}{
		{"batch_1", "batch_1-2026-06-01", apollo.StatusPending, "0,1,2,3,4,8"},
		{"batch_1", "batch_1-2026-06-01", apollo.Status(2), "0,1,2,3,4,6,8"},
		{"batch_2", "c7", apollo.StatusPending, "0,1,2,3,5"},
		{"x", "y", apollo.Status(1), "0,7"},
		{"", "", apollo.StatusPending, "0"},
		{"bat", "batch_1", apollo.StatusPending, "0,1,2,3,4"}, // by task ID only
	}
	for _, tt := range tests {
		got := strings.Join(indexMatch(x, tt.name, tt.id, tt.st), ",")
		if got != tt.want {
			t.Errorf("match(%q, %q, %v) = %s, want %s", tt.name, tt.id, tt.st, got, tt.want)
		}
		if brute := strings.Join(bruteMatch(gs, tt.name, tt.id, tt.st), ","); brute != tt.want {
			t.Errorf("the test is wrong: brute force gives %s for %q, %q", brute, tt.name, tt.id)
		}
	}
	// Removing every group empties the index and its lengths.
	for i, g := range gs {
		if empty := x.remove(g); empty != (i == len(gs)-1) {
			t.Fatalf("remove %d of %d: empty %v", i+1, len(gs), empty)
		}
	}
	if len(x.byPrefix) != 0 || len(x.lens) != 0 {
		t.Errorf("left after removing all: %v %v", x.byPrefix, x.lens)
	}
}

// FuzzTaskIndex: for any groups, any removals and any change, the index
// selects exactly the groups whose filters match, each once.
func FuzzTaskIndex(f *testing.F) {
	f.Add("batch_,b,,batch_1|4,c", uint8(0b00101), "batch_1", "batch_1-x", uint8(2))
	f.Add("a,a,ab,abc,b|1", uint8(0b00010), "abc", "b", uint8(0))
	f.Add(",,,", uint8(0xff), "", "", uint8(1))
	f.Add("j0001,j0002,j0003,c1", uint8(0), "j0002", "c1", uint8(1))
	f.Fuzz(func(t *testing.T, specs string, removeMask uint8, name, id string, st uint8) {
		gs := indexGroups(strings.Split(specs, ","))
		if len(gs) > 64 {
			return
		}
		x := newTaskIndex()
		for _, g := range gs {
			x.add(g)
		}
		var kept []*group
		for i, g := range gs {
			if i < 8 && removeMask&(1<<i) != 0 {
				x.remove(g)
				continue
			}
			kept = append(kept, g)
		}
		status := apollo.Status(st % 8)
		got, want := indexMatch(x, name, id, status), bruteMatch(kept, name, id, status)
		if !slices.Equal(got, want) {
			t.Fatalf("groups %q less mask %b, change %q/%q/%d: index %v, filters %v", specs, removeMask, name, id, status, got, want)
		}
	})
}
