package main

import (
	"log/slog"
	"strconv"

	"github.com/apollo-11/apollo/config"
)

// servedLimits are limits.connections and the stream limits as this
// process can hold them (docs/operations.md, "Connections").
type servedLimits struct {
	conns, streams, tenantStreams int
}

// connectionLimits fits limits.connections into the files the process may
// open (files; 0: unknown), keeping a quarter of them for everything else
// it opens (the log's segments, the archive, the audit files, Redis, NATS
// and the channels' connections), and the streams into half the
// connections: a stream holds its connection as long as it lives, and
// streams alone must never fill every place a reporter needs. What is
// lowered is logged.
func connectionLimits(l config.Limits, files int, log *slog.Logger) servedLimits {
	s := servedLimits{conns: l.Connections, streams: l.StreamClients, tenantStreams: l.TenantStreamClients}
	if room := files / 4 * 3; files > 0 && s.conns > room {
		s.conns = max(room, 16)
		log.Warn("limits.connections lowered to "+strconv.Itoa(s.conns)+": the process may open only "+strconv.Itoa(files)+" files",
			"configured", l.Connections, "hint", "raise the open-files limit (ulimit -n; LimitNOFILE= under systemd) for more")
	}
	if half := max(s.conns/2, 1); s.streams > half {
		s.streams = half
		log.Warn("limits.stream_clients lowered to "+strconv.Itoa(half)+": streams may hold at most half of the connections (limits.connections)",
			"configured", l.StreamClients)
	}
	if s.tenantStreams > s.streams {
		s.tenantStreams = s.streams
	}
	return s
}
