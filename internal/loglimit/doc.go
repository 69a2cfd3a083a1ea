// Package loglimit keeps a hot path from flooding the log: a Limiter lets
// one line of each kind through per period and counts the ones it holds
// back, so the next line that gets through can say how many there were.
// The bus, the alert engine, the notification lanes, the scheduler, the
// agent and the cluster node all log through one.
package loglimit
