package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		field string
		opts  Options
	}{
		{"Client", Options{}},
		{"Prefix", Options{Client: c, Prefix: "a{b}"}},
		{"Writer", Options{Client: c, Writer: "bus 1"}},
		{"Writer", Options{Client: c, Writer: "a@b"}},
		{"FlushInterval", Options{Client: c, FlushInterval: time.Millisecond}},
		{"BucketRetention", Options{Client: c, BucketRetention: 15 * time.Second}},
		{"RollupRetention", Options{Client: c, RollupRetention: 30 * time.Minute}},
		{"MaintainEvery", Options{Client: c, MaintainEvery: time.Second}},
		{"MaxDirty", Options{Client: c, MaxDirty: -1}},
	} {
		_, err := NewStore(tc.opts)
		var ae *apollo.Error
		if !errors.As(err, &ae) || ae.Field != "redisstore."+tc.field || ae.Hint == "" {
			t.Errorf("%+v: %v; want an error on %s with a hint", tc.opts, err, tc.field)
		}
	}
	agg, _ := metrics.New(metrics.Options{})
	if _, err := NewFlusher(agg, Options{Client: c, Writer: "bus-1.eu_west"}); err != nil {
		t.Errorf("a valid writer: %v", err)
	}
	if _, err := NewFlusher(nil, Options{Client: c}); err == nil {
		t.Error("NewFlusher without an aggregator: no error")
	}
}
