// Package storeaccess hands the root package the parts of a store.Store
// that only a cairnq Client or Worker uses: the worker's claim planning,
// the in-process wakeups, the validation a Client runs before it writes.
// Package store keeps them unexported so that its documented surface is
// what a user of a Store relies on, and so that they can change with the
// worker rather than with the protocol.
//
// The hand-over is one function value, set by package store at
// initialisation. Its signature cannot name store's types (store imports
// this package), so it takes and returns any; the root package asserts
// the result to an interface of its own that lists the methods it calls,
// once per Client, so a method that drifts fails every test at once.
// grpc-go's internal package hands its hooks over the same way.
package storeaccess

// ClaimHints are what a busy worker tells its claims.
type ClaimHints struct {
	// SkipProbe opens the claim transaction without the read-only probe
	// first. A worker whose last poll found work sets it: the probe exists
	// to keep idle workers off the write lock, and a busy one would pay
	// for it on every claim.
	SkipProbe bool
	// SkipRecover leaves expired leases for a later claim. A busy worker
	// sets it between recoveries: it claims many times a second, and
	// leases run for seconds at least.
	SkipRecover bool
	// Settle are finished attempts the claim settles before it draws, each
	// as Store.Complete would, in the claim's transaction: on SQLite a busy
	// worker's settlements ride on its next claim, one request and one
	// commit for both. The claim sets each one's outcome when it returns
	// without an error; with one, none of them was settled by it (as
	// uncertainly as any write whose reply was lost).
	Settle []*Completion
}

// Completion is one finished attempt a claim settles (ClaimHints.Settle).
type Completion struct {
	ID, WorkerID string
	Result       any // the result's JSON text, or nil to store none
	// Set by the claim: the status the task took, or Err, the store's
	// *LostLeaseError, when its lease was gone.
	Status string
	Err    error
}

// Ops returns the machinery of a *store.Store: a value whose methods the
// root package lists in its own interface. Set by package store.
var Ops func(store any) any

// ClientStore returns the *store.Store a *cairnq.Client runs on, for the
// conformance suite's scenario target, which drives the protocol's
// operations directly. Set by the root package.
var ClientStore func(client any) any
