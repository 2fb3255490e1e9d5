package pglisten

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestTimingAsDocumented: package executor states the listener's timing
// for users, in words; it must state what this package does.
func TestTimingAsDocumented(t *testing.T) {
	src, err := os.ReadFile("../../executor/executor.go")
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(src), "\npackage executor")
	doc := strings.Join(strings.Fields(strings.ReplaceAll(head, "//", "")), " ")
	for _, want := range []string{
		"may take " + inWords(ConnectTimeout),
		"waits " + inWords(backoffMin) + ", and the wait doubles",
		"up to " + inWords(backoffMax),
		"stayed up for " + inWords(2*backoffMax),
		"no notification for " + inWords(idleCheck),
		"takes longer than " + inWords(pingTimeout),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("executor's package documentation does not say %q", want)
		}
	}
}

// inWords writes d as the documentation does: "15 seconds".
func inWords(d time.Duration) string {
	if d < time.Second {
		return strings.TrimSuffix(d.String(), "ms") + " milliseconds"
	}
	return strings.TrimSuffix(d.String(), "s") + " seconds"
}
