package console

import (
	"context"
	"net/http"
)

// CountOnce runs the overview's background count once, as its goroutine
// does, for the benchmarks.
func CountOnce(h http.Handler) error {
	_, err := h.(*handler).k.count(context.Background())
	return err
}
