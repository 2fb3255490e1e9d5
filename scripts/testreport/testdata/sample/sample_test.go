// Package sample is the stream testreport's test reads: one of each thing
// go test can report.
package sample

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) {}

func TestSkipsWithReason(t *testing.T) {
	t.Log("something logged first")
	t.Skip("SAMPLE_DIR is not set; set it to run this")
}

func TestSubtests(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Skip("SAMPLE_DIR is not set; set it to run this")
		})
	}
}

func TestFails(t *testing.T) {
	if os.Getenv("SAMPLE_FAIL") == "" {
		return
	}
	t.Fatal("the failure message")
}

func BenchmarkNothing(b *testing.B) {
	for b.Loop() {
	}
}
