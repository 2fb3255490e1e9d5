package engine

import (
	"crypto/rand"
	"sync"
	"time"
)

// crockford is the Crockford base32 alphabet ULIDs use.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewTaskID returns "task_" and a 26-character ULID: 48 bits of epoch
// milliseconds then 80 random bits, so ids sort by creation time. Ids a
// process makes sort in the order it makes them, as the ULID spec's
// monotonic generator makes them: within one millisecond each is the
// previous one plus one, and an id is never of a millisecond older than
// the last one's (it takes the last one's, as a batch stamped with a
// time read before another submit minted does, or a clock stepped back).
// Claims break ties of priority and due time by id, so the tasks one
// process submits within a millisecond, or in one batch, are claimed in
// the order they were submitted.
func NewTaskID() string { return newTaskID(time.Now()) }

// lastID is the newest id's millisecond and random part.
var lastID struct {
	sync.Mutex
	ms   uint64
	rand [10]byte
}

func newTaskID(now time.Time) string {
	ms := uint64(max(now.UnixMilli(), 0))
	lastID.Lock()
	ms = max(ms, lastID.ms)
	if ms != lastID.ms || !increment(lastID.rand[:]) {
		lastID.ms = ms
		rand.Read(lastID.rand[:]) // never fails (crypto/rand documents it)
	}
	r := lastID.rand
	lastID.Unlock()
	return encodeTaskID(ms, r)
}

// encodeTaskID is the id of millisecond ms and random part r.
func encodeTaskID(ms uint64, r [10]byte) string {
	var b [16]byte
	copy(b[6:], r[:])
	b[0] = byte(ms >> 40)
	b[1] = byte(ms >> 32)
	b[2] = byte(ms >> 24)
	b[3] = byte(ms >> 16)
	b[4] = byte(ms >> 8)
	b[5] = byte(ms)

	var out [5 + 26]byte
	copy(out[:], "task_")
	// 128 bits as 26 base32 digits, most significant first: the first digit
	// holds the top 3 bits, each later one 5.
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 |
		uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	for i := 25; i >= 0; i-- {
		out[5+i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// validTaskID reports whether id has the protocol's id shape.
func validTaskID(id string) bool {
	if len(id) != 31 || id[:5] != "task_" {
		return false
	}
	if id[5] > '7' { // the first digit carries only 3 bits
		return false
	}
	for i := 5; i < len(id); i++ {
		c := id[i]
		ok := (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U')
		if !ok {
			return false
		}
	}
	return true
}

// increment adds one to the big-endian number in b, reporting false when
// it wrapped around (2^80 ids in one millisecond: never in practice).
func increment(b []byte) bool {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return true
		}
	}
	return false
}
