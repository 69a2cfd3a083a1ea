// Package sourcefile is what the readers of the files operators write
// (the jobs, rules and expectations files, apollo.yaml, the CLI's
// cli.yaml) share. Read reads one within a bound, and only a regular
// file, so that a wrong path (/dev/zero, a FIFO no one writes to, a huge
// log) is refused with a message instead of filling memory or hanging.
// BadChar finds the character YAML refuses in one, which the YAML library
// reports without a place.
//
// The files the server writes itself in its data directory are read the
// same way (ReadOwn, OpenOwn), with messages that say the file was
// replaced rather than ask for another path; its journals are read a line
// at a time within a bound on the line (ScanLines).
package sourcefile
