//go:build !unix

package cli

import "time"

// processCPU reports that this platform does not say how much CPU time the
// process has used.
func processCPU() (time.Duration, bool) { return 0, false }
