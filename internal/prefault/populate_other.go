//go:build !linux

package prefault

import "errors"

// Available says whether this system can populate memory in one call.
const Available = false

func populate([]byte) error { return errors.ErrUnsupported }

// MemoryCeiling is the memory this process may have in bytes (0 if
// unknown).
func MemoryCeiling() int64 { return 0 }
