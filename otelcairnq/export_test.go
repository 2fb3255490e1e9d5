package otelcairnq

import (
	"context"

	cairnq "github.com/cairnq/cairnq-go"
)

// RegisterDepthFrom is RegisterDepth over any Stats reader, so a test can
// count the reads.
func RegisterDepthFrom(t *Telemetry, src interface {
	Stats(ctx context.Context, queue string) (map[string]cairnq.StatusCounts, error)
}) (func() error, error) {
	return t.registerDepth(src)
}
