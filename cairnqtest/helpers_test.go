package cairnqtest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// recorder is a cairnqtest.TB that records failures instead of failing
// the test; its Fatalf ends the goroutine, as testing.T's does. TempDir
// and Cleanup are the real test's.
type recorder struct {
	*testing.T
	mu    sync.Mutex
	fatal bool
	msgs  []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.fatal = true
	r.mu.Unlock()
	runtime.Goexit()
}

// record runs fn with a recorder in a goroutine of its own, so that its
// Fatalf stops fn alone, and returns the recorder.
func record(t *testing.T, fn func(tb cairnqtest.TB)) *recorder {
	t.Helper()
	r := &recorder{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

// mustFail asserts the recorder saw a Fatalf whose message holds every
// one of wants, and returns the message.
func (r *recorder) mustFail(t *testing.T, wants ...string) string {
	t.Helper()
	if !r.fatal || len(r.msgs) == 0 {
		t.Fatalf("the helper did not fail the test (messages: %q)", r.msgs)
	}
	msg := r.msgs[len(r.msgs)-1]
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("failure message lacks %q:\n%s", w, msg)
		}
	}
	return msg
}

// mustPass asserts the recorder saw no failure.
func (r *recorder) mustPass(t *testing.T) {
	t.Helper()
	if r.fatal || len(r.msgs) > 0 {
		t.Fatalf("the helper failed the test: %q", r.msgs)
	}
}

// testCtx is a context bounded well inside the test binary's timeout.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
