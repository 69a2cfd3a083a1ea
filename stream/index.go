package stream

import (
	"slices"
)

// taskIndex finds the groups of one tenant that want a task change without
// testing every group's filter: it looks the change's job name and task ID
// up, cut to each prefix length that some group uses. With a thousand
// groups filtered by job, testing each filter was most of the hub's time
// under its lock; a lookup per distinct prefix length is a handful.
type taskIndex struct {
	byPrefix map[string][]*group
	// lens are the distinct prefix lengths of byPrefix's keys, ascending,
	// with how many keys have each.
	lens []prefixLen
}

type prefixLen struct{ n, keys int }

func newTaskIndex() *taskIndex { return &taskIndex{byPrefix: map[string][]*group{}} }

// add indexes a group that wants tasks.
func (x *taskIndex) add(g *group) {
	p := g.f.prefix
	gs, ok := x.byPrefix[p]
	x.byPrefix[p] = append(gs, g)
	if ok {
		return
	}
	i, found := slices.BinarySearchFunc(x.lens, len(p), func(l prefixLen, n int) int { return l.n - n })
	if found {
		x.lens[i].keys++
		return
	}
	x.lens = slices.Insert(x.lens, i, prefixLen{n: len(p), keys: 1})
}

// remove drops a group; it reports whether the index is now empty.
func (x *taskIndex) remove(g *group) bool {
	p := g.f.prefix
	gs := x.byPrefix[p]
	i := slices.Index(gs, g)
	if i < 0 {
		return len(x.byPrefix) == 0
	}
	if gs = slices.Delete(gs, i, i+1); len(gs) > 0 {
		x.byPrefix[p] = gs
		return false
	}
	delete(x.byPrefix, p)
	j, _ := slices.BinarySearchFunc(x.lens, len(p), func(l prefixLen, n int) int { return l.n - n })
	if x.lens[j].keys--; x.lens[j].keys == 0 {
		x.lens = slices.Delete(x.lens, j, j+1)
	}
	return len(x.byPrefix) == 0
}

// match appends to dst every group whose filter selects the change: its
// prefix starts the name or the task ID, and its statuses (if any)
// include one of sts (statusBits: the task's status now and before). Each group is appended once: a group has one prefix, so it
// is found under name[:n] or taskID[:n], and the second lookup is skipped
// when both cuts are the same string.
func (x *taskIndex) match(dst []*group, name, taskID string, sts uint8) []*group {
	for _, l := range x.lens {
		n := l.n
		inName, inID := n <= len(name), n <= len(taskID)
		if inName {
			dst = appendWanting(dst, x.byPrefix[name[:n]], sts)
		}
		if inID && !(inName && name[:n] == taskID[:n]) {
			dst = appendWanting(dst, x.byPrefix[taskID[:n]], sts)
		}
		if !inName && !inID {
			break // lens ascend: no longer prefix fits either
		}
	}
	return dst
}

func appendWanting(dst, gs []*group, sts uint8) []*group {
	for _, g := range gs {
		if g.f.statuses == 0 || g.f.statuses&sts != 0 {
			dst = append(dst, g)
		}
	}
	return dst
}
