// Package outboxtest is the conformance suite of notify.Outbox: what a
// process owed when it stopped or died is owed to the next one, oldest
// first and as it was written, tenants and hostile text included; what
// was settled is not. notify.FileOutbox passes it; redisstore runs it
// against its Outbox over a real Redis.
package outboxtest
