package conformance

import (
	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// storeOf returns the store under c. The suite drives the protocol's
// operations directly (a claim with no worker, a settlement by a given
// worker id), which a Client does not offer.
func storeOf(c *cairnq.Client) *engine.Store { return engine.Of(c.Store()) }
