// Package ratelimit holds the token bucket a worker's RateLimit runs on:
// how many tasks of a name may start now, and how long until the next
// may. It imports nothing of cairnq.
package ratelimit

import (
	"math"
	"time"
)

// Bucket is one rate limit's state: Rate tokens a second up to Burst,
// one spent per task started. Not safe for concurrent use: one claim
// loop owns it. Times are passed in, so that a claim reads one clock.
type Bucket struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// New returns a full bucket of rate tokens a second, at most burst (at
// least 1).
func New(rate float64, burst int) *Bucket {
	b := float64(max(burst, 1))
	return &Bucket{rate: rate, burst: b, tokens: b}
}

// Available returns how many tasks may start at now.
func (b *Bucket) Available(now time.Time) int {
	b.refill(now)
	return int(b.tokens)
}

// Take spends n tokens, for tasks claimed at now.
func (b *Bucket) Take(now time.Time, n int) {
	b.refill(now)
	b.tokens -= float64(n)
}

// Next returns how long until one more task may start; 0 if one may now.
func (b *Bucket) Next(now time.Time) time.Duration {
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - b.tokens) / b.rate * float64(time.Second)))
}

func (b *Bucket) refill(now time.Time) {
	if !b.at.IsZero() && now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
	}
	b.at = now
}
