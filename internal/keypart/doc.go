// Package keypart escapes one segment of a ':'-separated key (a Redis key,
// a dedup lock), so that segments chosen by operators or reporters — a
// tenant named "a:b" — can never be read as two, or as another's.
package keypart
