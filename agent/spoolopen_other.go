//go:build !unix

package agent

// spoolReadFlags: no O_NOFOLLOW or O_NONBLOCK here; openSpoolFile still
// reads only the regular file it listed or wrote.
const spoolReadFlags = 0
