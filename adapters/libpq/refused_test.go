package cairnqlibpq

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/lib/pq"
)

func TestRefusedClassifiesLISTENErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"pooler: feature not supported", &pq.Error{Severity: "ERROR", Code: "0A000"}, true},
		{"hot standby: read-only transaction", &pq.Error{Severity: "ERROR", Code: "25006"}, true},
		{"privilege", &pq.Error{Severity: "ERROR", Code: "42501"}, true},
		{"wrapped", fmt.Errorf("x: %w", &pq.Error{Severity: "ERROR", Code: "0A000"}), true},
		{"terminated backend", &pq.Error{Severity: "FATAL", Code: "57P01"}, false},
		{"admin shutdown, severity localized", &pq.Error{Severity: "FATAL_LOCALIZED", Code: "57P01"}, false},
		{"fatal of any class", &pq.Error{Severity: "FATAL", Code: "0A000"}, false},
		{"panic", &pq.Error{Severity: "PANIC", Code: "XX000"}, false},
		{"too many connections", &pq.Error{Severity: "ERROR", Code: "53300"}, false},
		{"bad password", &pq.Error{Severity: "ERROR", Code: "28P01"}, false},
		{"no such database", &pq.Error{Severity: "ERROR", Code: "3D000"}, false},
		{"serialization", &pq.Error{Severity: "ERROR", Code: "40001"}, false},
		{"connection exception", &pq.Error{Severity: "ERROR", Code: "08006"}, false},
		{"no code", &pq.Error{Severity: "ERROR"}, false},
		{"not a server error", io.ErrUnexpectedEOF, false},
		{"nil", nil, false},
		{"plain", errors.New("dial tcp: connection refused"), false},
	} {
		if got := refused(c.err); got != c.want {
			t.Errorf("%s: refused = %v, want %v", c.name, got, c.want)
		}
	}
}
