package cairnq

import "github.com/cairnq/cairnq-go/internal/engine"

// StoreOf gives the tests the store under a client, to drive the
// protocol's operations directly (a worker that dies holding a lease).
func StoreOf(c *Client) *engine.Store { return c.store }

// DoneWaiters counts the settlement subscriptions open in c's process.
func DoneWaiters(c *Client) int { return c.store.DoneWaiters() }
