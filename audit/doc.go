// Package audit records who changed what: manual corrections, acks,
// silences, rule changes and failed authentications. Entries go to a JSON
// lines file in the data directory (kept like any log: rotate it with the
// data directory's backups) and to a bounded ring that GET /api/v1/audit
// reads, newest first, for admins.
package audit
