package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/redisstore/redistest"
)

// The three-process bus writes its metrics under the writer ID of its
// log: the one saved in its data directory; "" for a log that has records
// and none saved (a bus of the releases before, upgraded) and for a new
// log when Redis followed no log with records or holds no metrics; an ID
// of its own for a new log when Redis holds another log's metrics. The ID
// is saved, and the next start keeps it.
func TestMetricsWriterOfTheBusLog(t *testing.T) {
	t.Parallel()
	type redisHolds struct {
		mark    string   // the change feed's saved mark, "<mark> <epoch>"; "" none
		writers []string // announced
	}
	for _, tc := range []struct {
		name    string
		redis   redisHolds
		file    *string // saved in the data directory; nil none
		lastLSN uint64
		own     bool // a new ID, "log-..."
		want    string
		retire  []string
	}{
		{name: "NewDeployment"},
		{name: "UpgradedKeepsTheUnnamedWriter", redis: redisHolds{"42 e1", []string{""}}, lastLSN: 42, retire: nil},
		{name: "UpgradedAfterALostTail", redis: redisHolds{"42 e1", []string{""}}, lastLSN: 40},
		{name: "NewDataDirectory", redis: redisHolds{"57 e1", []string{""}}, own: true, retire: []string{""}},
		{name: "NewDataDirectoryAfterAnother", redis: redisHolds{"9 e2", []string{"", "log-0123456789abcdef"}}, own: true, retire: []string{"", "log-0123456789abcdef"}},
		{name: "AnIdleLogRestarted", redis: redisHolds{"0 e1", []string{""}}},
		{name: "NoMarkSaved", redis: redisHolds{"", []string{""}}},
		{name: "NoMetrics", redis: redisHolds{"57 e1", nil}},
		{name: "SavedIsKept", redis: redisHolds{"57 e1", []string{"", "log-a"}}, file: ptr("log-a\n"), lastLSN: 3, want: "log-a", retire: []string{""}},
		{name: "SavedUnnamedIsKept", redis: redisHolds{"57 e2", []string{"", "log-a"}}, file: ptr(""), want: "", retire: []string{"log-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, prefix := redistest.Client(t)
			if tc.redis.mark != "" {
				if err := c.Set(ctx, prefix+":{changes}:mark", tc.redis.mark, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range tc.redis.writers {
				if err := c.ZAdd(ctx, prefix+":metric:writers", redis.Z{Score: 1, Member: w}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			if tc.file != nil {
				if err := os.WriteFile(filepath.Join(dir, writerFile), []byte(*tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			quiet := slog.New(slog.DiscardHandler)
			w, retire, err := metricsWriter(ctx, c, prefix, dir, tc.lastLSN, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if tc.own && !strings.HasPrefix(w, "log-") || !tc.own && w != tc.want {
				t.Fatalf("writer %q, want %q (own ID: %v)", w, tc.want, tc.own)
			}
			slices.Sort(retire)
			if !slices.Equal(retire, tc.retire) {
				t.Errorf("retires %q, want %q", retire, tc.retire)
			}
			// Saved: the next start, its log no longer empty and the
			// writer announced, keeps it.
			if err := c.ZAdd(ctx, prefix+":metric:writers", redis.Z{Score: 2, Member: w}).Err(); err != nil {
				t.Fatal(err)
			}
			again, _, err := metricsWriter(ctx, c, prefix, dir, tc.lastLSN+7, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if again != w {
				t.Errorf("restarted, the bus writes as %q, was %q", again, w)
			}
		})
	}
}

// A saved writer ID that is not one stops the start with what to do.
func TestMetricsWriterFileThatDoesNotRead(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	dir := t.TempDir()
	path := filepath.Join(dir, writerFile)
	if err := os.WriteFile(path, []byte("log a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := metricsWriter(context.Background(), c, prefix, dir, 5, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "put back the ID") {
		t.Fatalf("error %v; want one naming %s and what to do", err, path)
	}
}

func ptr(s string) *string { return &s }
