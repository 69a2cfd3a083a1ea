// Package audit records who changed what: manual corrections, acks,
// silences, rule changes, job actions and failed authentications.
//
// Entries go to JSON lines files in the data directory, rotated by size
// (audit.jsonl, .1, .2, .3 for the default tenant's entries, a set of its
// own for each other tenant's, server.jsonl and its rotations for the
// server's), and to bounded rings in memory, one per
// tenant, that GET /api/v1/audit reads, newest first, for admins. Failed
// authentications by unknown callers are aggregated per source and
// interval, fields are cut to a limit, and the file is not written while
// the disk is short of the space kept for the write-ahead log: no caller
// without a token, and no other tenant, can fill the disk or push a
// tenant's entries out.
package audit
