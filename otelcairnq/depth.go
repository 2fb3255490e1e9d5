package otelcairnq

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	cairnq "github.com/cairnq/cairnq-go"
)

// statser is what the depth gauge reads: a *cairnq.Client.
type statser interface {
	Stats(ctx context.Context, queue string) (map[string]cairnq.StatusCounts, error)
}

// RegisterDepth reports cairnq.queue.depth, the number of tasks per queue
// (messaging.destination.name) and status (cairnq.task.status: queued,
// running, succeeded, failed, canceled), read with one c.Stats per
// collection: Stats counts every row, so a collection interval of seconds
// rather than milliseconds suits it. The gauge describes the database, not
// the process: register one client per database, and call unregister
// before closing c. A failed read is reported to the meter provider's
// error handler and leaves the gauge without points for that collection.
func (t *Telemetry) RegisterDepth(c *cairnq.Client) (unregister func() error, err error) {
	return t.registerDepth(c)
}

func (t *Telemetry) registerDepth(c statser) (func() error, error) {
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		stats, err := c.Stats(ctx, "")
		if err != nil {
			return err
		}
		for queue, n := range stats {
			for _, s := range []struct {
				status string
				n      int
			}{
				{string(cairnq.StatusQueued), n.Queued},
				{string(cairnq.StatusRunning), n.Running},
				{string(cairnq.StatusSucceeded), n.Succeeded},
				{string(cairnq.StatusFailed), n.Failed},
				{string(cairnq.StatusCanceled), n.Canceled},
			} {
				o.ObserveInt64(t.depth, int64(s.n), metric.WithAttributes(
					semconv.MessagingDestinationName(queue), AttrTaskStatus.String(s.status)))
			}
		}
		return nil
	}, t.depth)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}
