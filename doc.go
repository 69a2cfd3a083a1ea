// Package apollo holds Apollo-11's domain: the events that executors report,
// the six task states and the one table of legal transitions between them,
// tasks, alerts and notifications, the error type every layer returns, and
// the clock that services take so tests can move time by hand.
//
// It imports the standard library only. Every other package depends on it;
// it depends on none of them.
package apollo
