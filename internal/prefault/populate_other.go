//go:build !linux

package prefault

import "errors"

// Available says whether this system can populate memory in one call.
const Available = false

func populate([]byte) error { return errors.ErrUnsupported }

// TotalMemory is the machine's memory in bytes (0 if unknown).
func TotalMemory() int64 { return 0 }
