package redisstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		kind string
	}{
		{"redis://127.0.0.1:6379/15", "*redis.Client"},
		{"rediss://user:pw@example.com:6380/0?dial_timeout=3s", "*redis.Client"},
		{"unix:///run/redis.sock?db=2", "*redis.Client"},
		{"redis-sentinel://:pw@10.0.0.1:26379/0?master_name=mymaster&addr=10.0.0.2:26379", "*redis.Client"},
		{"redis-cluster://10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000", "*redis.ClusterClient"},
	} {
		c, err := Open(tc.url)
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		if got := typeName(c); got != tc.kind {
			t.Errorf("Open(%q) made a %s, want %s", tc.url, got, tc.kind)
		}
		c.Close()
	}
}

func typeName(c redis.UniversalClient) string {
	switch c.(type) {
	case *redis.Client:
		return "*redis.Client"
	case *redis.ClusterClient:
		return "*redis.ClusterClient"
	}
	return "other"
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, says string }{
		{"127.0.0.1:6379", "no scheme"},
		{"http://x", `"http" is not one of`},
		{"redis-sentinel://host:26379", "no master_name"},
		{"redis://user:sup3rs3cret@host:6379/0?nonsense=1", "nonsense"},
		{"redis://user:sup3rs3cret@host:notaport", ""},
		{"redis://a-rather-long-user-name:sup3rs3cret@host:6379/0?nonsense=1", "nonsense"},
	} {
		_, err := Open(tc.url)
		var ae *apollo.Error
		if !errors.As(err, &ae) || ae.Code != apollo.EINVALID || ae.Field != "redis" || ae.Hint == "" {
			t.Errorf("Open(%q): %v; want an *apollo.Error invalid on redis with a hint", tc.url, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Open(%q): %q does not say %q", tc.url, err, tc.says)
		}
		if strings.Contains(err.Error(), "sup3rs3cret") {
			t.Errorf("Open(%q): the error shows the password: %q", tc.url, err)
		}
	}
}

// Open never panics, and its errors never show the URL's password.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "rediss://u:p4ssw0rdXY@h:1/2?db=x", "redis-sentinel://:p4ssw0rdXY@h:1?master_name=m",
		"redis-cluster://h:1?addr=:", "unix:///x?db=a", "redis://u:p4ssw0rdXY@[::1", "://", "redis://%zz@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Open(s)
		if err == nil {
			c.Close()
			return
		}
		_, pw, _ := strings.Cut(userinfo(s), ":")
		if len(pw) >= 8 && !strings.Contains(urlHint, pw) && strings.Contains(err.Error(), pw) {
			t.Fatalf("Open(%q): the error shows the password %q: %v", s, pw, err)
		}
	})
}
