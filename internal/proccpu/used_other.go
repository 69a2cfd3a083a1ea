//go:build !unix

package proccpu

import "time"

// Used is the user and system time this process has used; 0 where the
// system does not say, as here.
func Used() time.Duration { return 0 }
