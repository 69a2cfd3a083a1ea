package sched

import "github.com/apollo-11/apollo/expect"

// Issue is one problem found in a jobs file; the jobs file and the
// expectations file report problems the same way.
type Issue = expect.Issue

// FileError is every problem found in one jobs file, in file order. Parse
// reports all of them at once so that a user fixes a file in one pass.
type FileError = expect.FileError

// fileError returns the issues in file order as one error.
func fileError(issues []*Issue) *FileError { return expect.NewFileError("jobs file", issues) }
