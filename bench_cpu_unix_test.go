//go:build unix

package cairnq_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the test process has used
// so far. On a shared machine it is a steadier measure of cost than a rate.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
