package redisstore

import "testing"

func TestProofRoundTrip(t *testing.T) {
	p := procProof{host: "vm", boot: "0f1e", pidNS: "pid:[4026531836]", pid: 77, start: 12345}
	got, ok := parseProof("vm-77 " + p.String())
	if !ok || got != p {
		t.Fatalf("%+v %v, want %+v", got, ok, p)
	}
	for _, v := range []string{"vm-77", "vm-77 ", "vm-77 proc:", "vm-77 proc:a/b/c/0/1", "vm-77 proc:a/b/c/x/1", "vm-77 proc:a//c/1/1", "vm-77 lock:a/b/c/1/1", "vm-77 proc:a/b/c/1/1/9"} {
		if _, ok := parseProof(v); ok {
			t.Errorf("%q reads as a proof", v)
		}
	}
}

func FuzzParseProof(f *testing.F) {
	f.Add("vm-77 proc:vm/0f1e/pid:[4026531836]/77/12345")
	f.Add("x proc:////")
	f.Fuzz(func(t *testing.T, v string) {
		p, ok := parseProof(v)
		if !ok {
			return
		}
		if p.pid <= 0 || p.host == "" || p.boot == "" || p.pidNS == "" {
			t.Fatalf("%q read as %+v", v, p)
		}
		if again, ok := parseProof(leaseID(v) + " " + p.String()); !ok || again != p {
			t.Fatalf("%q: %+v does not read back (%+v)", v, p, again)
		}
	})
}

func TestProvablyDead(t *testing.T) {
	self := procProof{host: "vm", boot: "b", pidNS: "ns", pid: 10, start: 100}
	deadPID := func(int, uint64) bool { return false }
	livePID := func(int, uint64) bool { return true }
	for _, c := range []struct {
		name   string
		holder procProof
		alive  func(int, uint64) bool
		want   bool
	}{
		{"dead, same host, boot and namespace", procProof{"vm", "b", "ns", 9, 90}, deadPID, true},
		{"alive", procProof{"vm", "b", "ns", 9, 90}, livePID, false},
		{"another host", procProof{"other", "b", "ns", 9, 90}, deadPID, false},
		{"another boot", procProof{"vm", "b2", "ns", 9, 90}, deadPID, false},
		{"another PID namespace (a container)", procProof{"vm", "b", "ns2", 9, 90}, deadPID, false},
		{"this very process", self, deadPID, false},
		{"this PID, started before: a restart that got the same PID", procProof{"vm", "b", "ns", 10, 50}, deadPID, true},
	} {
		if got := provablyDead(self, c.holder, c.alive); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
