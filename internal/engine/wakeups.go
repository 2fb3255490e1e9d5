package engine

import (
	"context"
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// The notification channels the 0003 trigger emits on.
const (
	channelQueued = "cairnq_queued" // payload: the queue
	channelDone   = "cairnq_done"   // payload: the task id
)

// SubscribeDone returns a channel closed when the task with id may have
// reached a terminal status (settled by this process, or on Postgres by
// any, through LISTEN), and a func that unsubscribes. It is a wakeup, not
// a promise: callers re-read the task either way, and subscribe before
// they read. On Postgres the first subscriber may wait for LISTEN to be
// set up, bounded by ctx. Calling the unsubscribe func again does nothing,
// here and in SubscribeQueued and Subscribe.
func (s *Store) SubscribeDone(ctx context.Context, id string) (<-chan struct{}, func()) {
	ch, unsubscribe := s.hub.SubscribeDone(id)
	s.doneListen.Acquire(ctx)
	return ch, sync.OnceFunc(func() {
		defer s.doneListen.Release()
		unsubscribe()
	})
}

// SubscribeQueued returns a channel closed when a task may have become
// claimable on one of queues (a submit or a requeue, in this process or on
// Postgres in any), and a func that unsubscribes. Like SubscribeDone, it
// may wait for LISTEN to be set up.
func (s *Store) SubscribeQueued(ctx context.Context, queues []string) (<-chan struct{}, func()) {
	ch, unsubscribe := s.hub.SubscribeQueued(queues)
	s.queuedListen.Acquire(ctx)
	return ch, sync.OnceFunc(func() {
		unsubscribe()
		s.queuedListen.Release()
	})
}

// DoneWaiters reports how many subscriptions wait on a task's settlement
// in this process. It is introspection for tests and diagnostics.
func (s *Store) DoneWaiters() int { return s.hub.DoneWaiters() }

// Subscribe returns a channel receiving every queued and done signal of
// this process (from its own writes, and on Postgres from LISTEN), and a
// func that unsubscribes.
func (s *Store) Subscribe(ctx context.Context) (<-chan cairnqtype.Signal, func()) {
	ch, unsubscribe := s.hub.Watch()
	s.queuedListen.Acquire(ctx)
	s.doneListen.Acquire(ctx)
	return ch, sync.OnceFunc(func() {
		unsubscribe()
		s.queuedListen.Release()
		s.doneListen.Release()
	})
}
