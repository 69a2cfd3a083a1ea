// Package wal is Apollo-11's write-ahead log: the bus appends every accepted
// event here and acknowledges it only once the log says it is durable.
// Recovery loads the newest snapshot and replays the records after it.
//
// The log is a directory of segment files named by their first LSN
// ("<20 digits>.wal"), each a header ("APWAL", version, first LSN) followed
// by records of "length u32 | CRC32C(payload) u32 | payload", little-endian.
// One flusher goroutine writes the appended records with one write call per
// batch and, under SyncBatch, one fsync for every record that arrived while
// the previous fsync ran (group commit). It keeps the active segment filled
// a runway ahead of its records with 0xFF bytes, so that most fsyncs
// overwrite blocks the file has and do not extend it (cheaper: no block
// allocation, no inode write); a clean Close and a roll trim the fill.
//
// Guarantees: once Wait(lsn) returns nil, the record survives a crash of the
// process (every policy) and of the machine (SyncBatch; SyncInterval after
// the next tick). LSNs are contiguous. At Open, a bad record at the very end
// of the last segment that the file ends inside of, or that zeros or stale
// bytes follow, is a write the crash cut short, never acknowledged, and is
// cut off; "the end" is where the runway's fill begins, and a tail that is
// all fill is the records' clean end. So is a bad record followed by fill
// to a block's end and then records: blocks taken at different moments, by
// a copy of the running log or by a crash's out-of-order writeback. A last record that is whole but fails its checksum was damaged
// after it was written and may have been acknowledged: like damage
// anywhere else, it stops Open with ErrCorrupt naming the file and offset (and
// its LSN), and the hint says how to drop it. Snapshots ("<lsn>.snap") are written to a temporary file,
// fsynced and renamed, so a snapshot is whole or absent.
package wal
