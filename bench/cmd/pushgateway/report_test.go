package main

import "testing"

func TestX(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{{416456, "416456×"}, {51.3, "51.3×"}, {0.72, "0.72×"}, {0.017, "0.017×"}, {0.0012, "0.0012×"}, {0.0000044, "0.0000044×"}, {0, "0×"}} {
		if got := x(c.f); got != c.want {
			t.Errorf("x(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}
