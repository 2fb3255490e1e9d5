package cairnqlibpq_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// fakeServer speaks just enough of the PostgreSQL wire protocol to stand in
// for a server that cannot be had for real in a test: one that accepts
// connections but refuses LISTEN (a pooler, a hot standby), or one that
// accepts TCP connections and then never answers.
type fakeServer struct {
	ln   net.Listener
	mode fakeMode
	code string // SQLSTATE of the LISTEN refusal

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

type fakeMode int

const (
	fakeRefuseListen fakeMode = iota // log in, answer every query with an ERROR
	fakeSilent                       // accept, then never answer
)

func startFakeServer(t *testing.T, mode fakeMode, code string) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln, mode: mode, code: code}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

// dsn is a lib/pq DSN for the fake server.
func (s *fakeServer) dsn() string {
	addr := s.ln.Addr().(*net.TCPAddr)
	return fmt.Sprintf("host=127.0.0.1 port=%d user=fake dbname=fake sslmode=disable", addr.Port)
}

func (s *fakeServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.serve(c)
		}()
	}
}

func (s *fakeServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	if s.mode == fakeSilent {
		_, _ = io.Copy(io.Discard, r)
		return
	}
	// Startup message: int32 length, then the body (protocol version and
	// parameters), which is not looked at.
	var n uint32
	if binary.Read(r, binary.BigEndian, &n) != nil || n < 8 {
		return
	}
	if _, err := io.CopyN(io.Discard, r, int64(n-4)); err != nil {
		return
	}
	w := bufio.NewWriter(c)
	msg(w, 'R', u32(0)) // AuthenticationOk
	for _, kv := range [][2]string{
		{"server_version", "16.0"}, {"client_encoding", "UTF8"}, {"DateStyle", "ISO, MDY"},
		{"integer_datetimes", "on"}, {"standard_conforming_strings", "on"},
	} {
		msg(w, 'S', cstr(kv[0]), cstr(kv[1]))
	}
	msg(w, 'K', u32(1), u32(2)) // BackendKeyData
	msg(w, 'Z', []byte{'I'})    // ReadyForQuery
	if w.Flush() != nil {
		return
	}
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return
		}
		if binary.Read(r, binary.BigEndian, &n) != nil || n < 4 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch query := string(bytes.TrimRight(body, "\x00")); {
		case typ == 'X': // Terminate
			return
		case typ == 'Q' && query == routeQuery:
			// The listener's check before LISTEN: a server sees its
			// client's own address.
			peer := c.RemoteAddr().(*net.TCPAddr)
			msg(w, 'T', u16(2), field("addr", 25), field("port", 23))
			msg(w, 'D', u16(2), u32(uint32(len(peer.IP.String()))), []byte(peer.IP.String()),
				u32(uint32(len(strconv.Itoa(peer.Port)))), []byte(strconv.Itoa(peer.Port)))
			msg(w, 'C', cstr("SELECT 1"))
			msg(w, 'Z', []byte{'I'})
			if w.Flush() != nil {
				return
			}
		case typ == 'Q': // any other simple query: refuse it
			msg(w, 'E', cstr("SERROR"), cstr("VERROR"), cstr("C"+s.code),
				cstr("Mfake: LISTEN is not supported here"), []byte{0})
			msg(w, 'Z', []byte{'I'})
			if w.Flush() != nil {
				return
			}
		default:
			return
		}
	}
}

func msg(w *bufio.Writer, typ byte, parts ...[]byte) {
	n := 4
	for _, p := range parts {
		n += len(p)
	}
	_ = w.WriteByte(typ)
	_, _ = w.Write(u32(uint32(n)))
	for _, p := range parts {
		_, _ = w.Write(p)
	}
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// field is one column of a RowDescription, of type oid, in text format.
func field(name string, oid uint32) []byte {
	b := cstr(name)
	b = append(b, u32(0)...)   // table
	b = append(b, u16(0)...)   // column
	b = append(b, u32(oid)...) // type
	b = append(b, u16(0xffff)...)
	b = append(b, u32(0xffffffff)...)
	return append(b, u16(0)...) // text format
}

// routeQuery is what the listener asks before LISTEN, to learn whether
// its connections go straight to the server.
const routeQuery = "SELECT host(inet_client_addr()) AS addr, inet_client_port() AS port"

func cstr(s string) []byte { return append([]byte(s), 0) }
