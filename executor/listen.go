package executor

import "time"

// Timing of LISTEN in cairnq. The Listener of every adapter in this
// repository (pgx, lib/pq, gorm, bun) runs on one reconnect loop with the
// defaults below, and the Postgres store decides with ListenLinger and
// ListenRetryPause when a channel is listened to at all. A Listener written
// elsewhere is free to pick its own; these are what "reconnects with
// backoff" means here.
const (
	// ListenBackoffMin is the wait before a listener whose connection
	// dropped makes its first attempt to connect and LISTEN again. The wait
	// doubles after each failed attempt, up to ListenBackoffMax; every wait
	// is drawn at random from the upper half of its value ([d/2, d]), and a
	// connection that stayed up for twice ListenBackoffMax starts the next
	// reconnection from ListenBackoffMin again, so a server that accepts
	// and drops at once is not hammered.
	ListenBackoffMin = 50 * time.Millisecond
	// ListenBackoffMax caps the doubling wait between reconnection attempts
	// (see ListenBackoffMin).
	ListenBackoffMax = 5 * time.Second

	// ListenConnectTimeout bounds one attempt of a listener to connect and
	// LISTEN on all its channels, the first one included (whose context may
	// end it sooner).
	ListenConnectTimeout = 15 * time.Second

	// ListenIdleCheck is how long a listener waits without a notification
	// before it checks that its connection still answers (a ping, or a
	// notification it sends itself), and ListenPingTimeout how long that
	// check may take before the connection counts as dropped and is
	// replaced. TCP keepalive alone would take the better part of an hour
	// to notice a half-open connection.
	ListenIdleCheck   = 30 * time.Second
	ListenPingTimeout = 10 * time.Second

	// ListenLinger is how long the store keeps a channel listened to after
	// the last waiter that needed it (an idle worker, a Wait or Call, a
	// Watch) is gone, so that the next one does not pay a new LISTEN
	// connection.
	ListenLinger = 30 * time.Second
	// ListenRetryPause is how long the store's waiters poll without asking
	// for LISTEN again after a Listen call failed with an error other than
	// ErrListenUnavailable (which stops the asking for good): a server that
	// is down is not asked at every wait.
	ListenRetryPause = 5 * time.Second
)
