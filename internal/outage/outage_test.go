package outage_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lib/pq"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/outage"
)

// unsent is an error its driver says was raised before anything reached
// the server, as pgx's "conn closed" is.
type unsent struct{ safe bool }

func (e unsent) Error() string     { return "conn closed" }
func (e unsent) SafeToRetry() bool { return e.safe }

// The classification reads what an error is (its SQLSTATE, its type, the
// sentinels it wraps), the same for every driver, and never its words.
func TestOutageClassifiesByWhatTheErrorIs(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("cairnq/x: query: %w", err) }
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"starting up (pgx)", wrap(&pgconn.PgError{Severity: "FATAL", Code: "57P03"}), true},
		{"shutting down (lib/pq)", wrap(&pq.Error{Severity: "FATAL", Code: "57P01"}), true},
		{"crash reset", &pgconn.PgError{Code: "57P02"}, true},
		{"idle session closed", &pgconn.PgError{Code: "57P05"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"pgbouncer: server conn crashed", &pgconn.PgError{Severity: "FATAL", Code: "08P01"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, false},
		{"database dropped", &pgconn.PgError{Code: "57P04"}, false},
		{"bad password", &pgconn.PgError{Severity: "FATAL", Code: "28P01"}, false},
		{"no such database", &pgconn.PgError{Severity: "FATAL", Code: "3D000"}, false},
		{"no such table", &pq.Error{Code: "42P01"}, false},
		{"disk full", &pgconn.PgError{Code: "53100"}, false},
		{"a server error beside an end of stream", errors.Join(io.EOF, &pgconn.PgError{Code: "28P01"}), false},
		{"end of stream", wrap(io.EOF), true},
		{"cut mid-message", wrap(io.ErrUnexpectedEOF), true},
		{"database/sql: bad connection", wrap(driver.ErrBadConn), true},
		{"refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), true},
		{"reset", wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"no such host", wrap(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "db"}}), true},
		{"name lookup alone", &net.DNSError{Err: "server misbehaving", IsTemporary: true}, true},
		{"TLS alert", wrap(&net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}), false},
		{"nothing sent (pgx)", wrap(unsent{true}), true},
		{"maybe sent (pgx)", wrap(unsent{false}), false},
		{"already marked", wrap(cairnqtype.ErrUnavailable), true},
		{"canceled", wrap(context.Canceled), false},
		{"deadline", wrap(context.DeadlineExceeded), false},
		{"a DSN that does not parse", wrap(&url.Error{Op: "parse", URL: "postgres://", Err: errors.New("bad")}), false},
		{"plain", errors.New("connection refused"), false},
		{"nil", nil, false},
	} {
		if got := outage.Is(c.err); got != c.want {
			t.Errorf("%s: Is(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// Mark adds the sentinel and takes nothing away: the text, the driver's
// error and whatever else the chain held stay as they were.
func TestOutageMarkKeepsTheDriversError(t *testing.T) {
	live := context.Background()
	pe := &pgconn.PgError{Severity: "FATAL", Message: "the database system is starting up", Code: "57P03"}
	err := fmt.Errorf("cairnq/pgx: begin: %w", pe)
	marked := outage.Mark(live, err)
	if !errors.Is(marked, cairnqtype.ErrUnavailable) {
		t.Fatalf("Mark(%v) is not ErrUnavailable", err)
	}
	var got *pgconn.PgError
	if !errors.As(marked, &got) || got != pe {
		t.Errorf("the server's error is not reachable through the mark")
	}
	if marked.Error() != err.Error() {
		t.Errorf("text %q, want %q unchanged", marked, err)
	}
	if again := outage.Mark(live, marked); again != marked {
		t.Errorf("a second Mark wrapped again: %#v", again)
	}

	other := fmt.Errorf("cairnq/pgx: query: %w", &pgconn.PgError{Code: "42P01"})
	if outage.Mark(live, other) != other {
		t.Errorf("Mark changed an error that is no outage")
	}
	if outage.Mark(live, nil) != nil {
		t.Errorf("Mark(nil) is not nil")
	}

	// Once the call's context has ended, the failure is the caller's.
	canceled, cancel := context.WithCancel(live)
	cancel()
	eof := fmt.Errorf("cairnq: query: %w", io.ErrUnexpectedEOF)
	if outage.Mark(canceled, eof) != eof {
		t.Errorf("Mark under a canceled context marked %v", eof)
	}
	// A deadline that passed inside the driver while the call's context
	// lives was the driver's own: connect_timeout.
	connect := fmt.Errorf("cairnq: begin: failed to connect: %w", context.DeadlineExceeded)
	if m := outage.Mark(live, connect); !errors.Is(m, cairnqtype.ErrUnavailable) || !errors.Is(m, context.DeadlineExceeded) {
		t.Errorf("a connect timeout under a live context: %v, want ErrUnavailable with the deadline inside", m)
	}
}

// While a connection is being made, a server's answer is final: a pooler
// answers 08P01 to an unknown database, a startup parameter it does not
// pass on or a wrong password, as it does mid-session when it lost its
// server, and only the phase tells the two apart. A server saying "not
// now", and a connection that cannot be made at all, stay outages.
func TestOutageAtConnect(t *testing.T) {
	connect := func(err error) error {
		return fmt.Errorf("cairnq/x: query: %w", outage.AtConnect(fmt.Errorf("failed to connect: %w", err)))
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"pgbouncer: unknown database (pgx)", connect(&pgconn.PgError{Severity: "FATAL", Code: "08P01"}), false},
		{"pgbouncer: unsupported startup parameter (lib/pq)", connect(&pq.Error{Severity: "FATAL", Code: "08P01"}), false},
		{"another connection exception", connect(&pgconn.PgError{Code: "08006"}), false},
		{"bad password", connect(&pgconn.PgError{Severity: "FATAL", Code: "28P01"}), false},
		{"no such database", connect(&pq.Error{Severity: "FATAL", Code: "3D000"}), false},
		{"starting up", connect(&pgconn.PgError{Severity: "FATAL", Code: "57P03"}), true},
		{"shutting down", connect(&pgconn.PgError{Severity: "FATAL", Code: "57P01"}), true},
		{"too many connections", connect(&pq.Error{Severity: "FATAL", Code: "53300"}), true},
		{"refused", connect(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), true},
		{"cut during the startup", connect(io.ErrUnexpectedEOF), true},
		{"no such host", connect(&net.DNSError{Err: "no such host", Name: "db"}), true},
		{"TLS alert", connect(&net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}), false},
		{"marked twice", outage.AtConnect(connect(&pgconn.PgError{Code: "08P01"})), false},
		{"nil", outage.AtConnect(nil), false},
	} {
		if got := outage.Is(c.err); got != c.want {
			t.Errorf("%s: Is(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
		if got := errors.Is(outage.Mark(context.Background(), c.err), cairnqtype.ErrUnavailable); got != c.want {
			t.Errorf("%s: Mark(%v) is ErrUnavailable: %v, want %v", c.name, c.err, got, c.want)
		}
	}

	// The mark keeps the text and the driver's error, and a second pass
	// of Mark over an error wrapping it (the store's, over an adapter's)
	// leaves it as it is.
	pe := &pgconn.PgError{Severity: "FATAL", Message: "bouncer config error", Code: "08P01"}
	err := outage.AtConnect(fmt.Errorf("failed to connect: %w", pe))
	if err.Error() != "failed to connect: "+pe.Error() {
		t.Errorf("text %q, want the error's own", err)
	}
	var got *pgconn.PgError
	if !errors.As(err, &got) || got != pe {
		t.Errorf("the server's error is not reachable through the mark")
	}
	live := context.Background()
	once := outage.Mark(live, fmt.Errorf("cairnq/pgx: query: %w", err))
	if again := outage.Mark(live, fmt.Errorf("cairnq: reading installations: %w", once)); errors.Is(again, cairnqtype.ErrUnavailable) {
		t.Errorf("a second Mark made a refusal at connect an outage: %v", again)
	}
	if outage.AtConnect(err) != err {
		t.Errorf("AtConnect wrapped a marked error again")
	}

	// The connect timeout (the driver's own deadline under a live
	// context) is an outage at connect as anywhere, and a context that
	// ended is the caller's.
	timeout := outage.AtConnect(fmt.Errorf("failed to connect: %w", context.DeadlineExceeded))
	if !errors.Is(outage.Mark(live, timeout), cairnqtype.ErrUnavailable) {
		t.Errorf("a connect timeout under a live context is not ErrUnavailable")
	}
	canceled, cancel := context.WithCancel(live)
	cancel()
	if errors.Is(outage.Mark(canceled, timeout), cairnqtype.ErrUnavailable) {
		t.Errorf("a connect timeout under an ended context is ErrUnavailable")
	}

	// The mark goes first: an error Mark already marked stays an outage.
	if !outage.Is(outage.AtConnect(outage.Mark(live, pe))) {
		t.Errorf("AtConnect took the mark off an error Mark marked")
	}
}
