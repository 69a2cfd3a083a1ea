package bus

import (
	"fmt"
	"testing"

	"github.com/apollo-11/apollo"
)

// TestFanoutIdle: the owner hears when the last subscription ends, whether
// its reader closed it or it was cut off, and not before.
func TestFanoutIdle(t *testing.T) {
	t.Parallel()
	idle := 0
	f := NewFanout(func() { idle++ })
	a, b := f.Subscribe(1), f.Subscribe(10)
	change := &apollo.Change{Task: apollo.Task{TaskID: "t"}}
	f.Publish(change)
	f.Publish(change) // a's buffer is full: a is cut off
	if a.Err() != ErrSlowSubscriber || f.Len() != 1 || f.Cut() != 1 || idle != 0 {
		t.Fatalf("after a fell behind: a.Err %v, Len %d, Cut %d, idle %d; want cut off, 1, 1, 0", a.Err(), f.Len(), f.Cut(), idle)
	}
	b.Close()
	b.Close()
	if b.Err() != nil || f.Len() != 0 || f.Cut() != 1 || idle != 1 {
		t.Fatalf("after b closed twice: b.Err %v, Len %d, Cut %d, idle %d; want nil, 0, 1, 1", b.Err(), f.Len(), f.Cut(), idle)
	}
	if n := len(b.C()); n != 2 {
		t.Errorf("b kept %d changes, want the 2 published", n)
	}
	c := f.Subscribe(1)
	f.Close()
	if _, open := <-c.C(); open || c.Err() != nil || idle != 2 {
		t.Errorf("after Close: channel open %v, Err %v, idle %d; want closed, nil, 2", open, c.Err(), idle)
	}
}

func ExampleFanout() {
	f := NewFanout(nil)
	reader := f.Subscribe(8)
	slow := f.Subscribe(1)
	for _, id := range []string{"backup#1", "backup#2"} {
		f.Publish(&apollo.Change{Task: apollo.Task{TaskID: id, Status: apollo.StatusRunning}})
	}
	reader.Close()
	for c := range reader.C() {
		fmt.Println(c.Task.TaskID, c.Task.Status)
	}
	fmt.Println("slow:", slow.Err())
	// Output:
	// backup#1 running
	// backup#2 running
	// slow: bus: subscriber too slow, cut off; resynchronise
}
