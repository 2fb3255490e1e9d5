package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/protocol"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// gatedExecutor is a real executor whose gated statements (insert_task
// and insert_many unless a test picks others) wait at a gate the test
// opens, and are counted, so a test can line requests up behind a flush
// in progress and see how they were grouped. Everything else passes
// straight through.
type gatedExecutor struct {
	executor.Executor
	single, many string // the two statements' SQL

	mu       sync.Mutex
	calls    map[string]int
	last     context.Context // the last gated statement's context
	arrived  chan struct{}   // one send per gated statement reaching the gate
	gateOpen chan struct{}
}

func (g *gatedExecutor) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	if sql == g.single || sql == g.many {
		g.mu.Lock()
		g.calls[sql]++
		g.last = ctx
		g.mu.Unlock()
		g.arrived <- struct{}{}
		<-g.gateOpen
	}
	return g.Executor.Query(ctx, sql, args...)
}

func (g *gatedExecutor) count(sql string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[sql]
}

// openGatedPG opens a Postgres store over a fresh database through
// database/sql with pgx's stdlib, its inserts behind a gate.
func openGatedPG(t *testing.T) (*Store, *gatedExecutor) {
	return openGatedPGOn(t, stmtInsertTask, stmtInsertMany)
}

// openGatedPGOn is openGatedPG with the statements single and many (which
// may be the same) behind the gate.
func openGatedPGOn(t *testing.T, single, many string) (*Store, *gatedExecutor) {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	stmts := protocol.Statements(protocol.Postgres)
	g := &gatedExecutor{
		Executor: sqlexec.New(db, nil),
		single:   stmts.Get(single).SQL,
		many:     stmts.Get(many).SQL,
		calls:    map[string]int{},
		arrived:  make(chan struct{}, 16),
		gateOpen: make(chan struct{}),
	}
	s, err := OpenPostgres(t.Context(), g, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, g
}

type submitOutcome struct {
	p   SubmitParams
	t   *cairnqtype.Task
	err error
}

// lineUp submits first alone and waits until its insert holds the gate,
// then submits the rest and waits until all of them are queued behind it;
// it opens the gate and returns every outcome, first's at index 0.
func lineUp(t *testing.T, ctx context.Context, s *Store, g *gatedExecutor, first SubmitParams, rest []SubmitParams) []submitOutcome {
	t.Helper()
	be := s.be.(*pgBackend)
	out := make([]submitOutcome, 1+len(rest))
	var wg sync.WaitGroup
	submit := func(i int, p SubmitParams) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var task *cairnqtype.Task
			var err error
			if p.Name == serverRefusedRow {
				task, err = submitServerRefused(ctx, be)
			} else {
				task, err = s.Submit(ctx, p)
			}
			out[i] = submitOutcome{p, task, err}
		}()
	}
	submit(0, first)
	<-g.arrived
	for i, p := range rest {
		submit(i+1, p)
	}
	waitFor(t, "every later submit queued behind the first", func() bool { return be.inserter.Waiting() == len(rest) })
	close(g.gateOpen)
	wg.Wait()
	return out
}

// Unkeyed submits arriving while another is in flight go into one
// insert_many, and each caller gets back its own task, every field as a
// lone insert_task would have written it.
func TestInsertGroupsConcurrentSubmits(t *testing.T) {
	s, g := openGatedPG(t)
	ctx := t.Context()
	var rest []SubmitParams
	for i := range 20 {
		p := SubmitParams{Name: fmt.Sprintf("job-%d", i), Payload: map[string]any{"i": i, "s": `quote " and back\slash`}, SubmitOptions: cairnqtype.SubmitOptions{Queue: fmt.Sprintf("q%d", i%3), Priority: i - 10, Metadata: map[string]any{"m": i}, MaxAttempts: 1 + i%4, Delay: time.Duration(i) * time.Second}}
		if i%2 == 0 {
			p.ParentID, p.RootID, p.CorrelationID = "task_parent", "task_root", fmt.Sprintf("corr-%d", i)
		}
		rest = append(rest, p)
	}
	out := lineUp(t, ctx, s, g, SubmitParams{Name: "first"}, rest)

	if n := g.count(g.single); n != 1 {
		t.Errorf("insert_task ran %d times, want 1 (the first submit alone)", n)
	}
	if n := g.count(g.many); n != 1 {
		t.Errorf("insert_many ran %d times, want 1 (all 20 queued submits)", n)
	}
	seen := map[string]bool{}
	for _, o := range out {
		if o.err != nil {
			t.Fatalf("submit %s: %v", o.p.Name, o.err)
		}
		if seen[o.t.ID] {
			t.Fatalf("task %s returned twice", o.t.ID)
		}
		seen[o.t.ID] = true
		checkSubmitted(t, o.p, o.t)
		got, err := s.Get(ctx, o.t.ID)
		if err != nil {
			t.Fatal(err)
		}
		checkSubmitted(t, o.p, got)
		// insert_many returns a few columns and the store fills in the
		// rest: every field must still be what the stored row reads.
		if !reflect.DeepEqual(o.t, got) {
			t.Errorf("submit %s returned %+v, the stored row reads %+v", o.p.Name, o.t, got)
		}
	}
}

// checkSubmitted compares a task just submitted with what was asked.
func checkSubmitted(t *testing.T, p SubmitParams, got *cairnqtype.Task) {
	t.Helper()
	queue, maxAttempts, root := p.Queue, p.MaxAttempts, p.RootID
	if queue == "" {
		queue = cairnqtype.DefaultQueue
	}
	if maxAttempts == 0 {
		maxAttempts = DefaultMaxAttempts
	}
	if root == "" {
		root = got.ID
	}
	payload, _ := json.Marshal(p.Payload)
	if p.Payload == nil {
		payload = []byte("{}")
	}
	metadata, _ := json.Marshal(p.Metadata)
	if p.Metadata == nil {
		metadata = []byte("{}")
	}
	if got.Name != p.Name || got.Queue != queue || got.Status != cairnqtype.StatusQueued || got.Priority != p.Priority ||
		got.MaxAttempts != maxAttempts || got.Attempt != 0 || got.ParentID != p.ParentID || got.RootID != root ||
		got.CorrelationID != p.CorrelationID || !jsonEqual(got.Payload, payload) || !jsonEqual(got.Metadata, metadata) {
		t.Errorf("%s: got %+v\nwant name %s queue %s priority %d max_attempts %d parent %q root %q correlation %q payload %s metadata %s",
			p.Name, got, p.Name, queue, p.Priority, maxAttempts, p.ParentID, root, p.CorrelationID, payload, metadata)
	}
	// Each row reads the clock once per column, so the two may differ by
	// the time between the reads.
	if d := got.RunAt.Sub(got.CreatedAt); (d - p.Delay).Abs() > 500*time.Millisecond {
		t.Errorf("%s: run_at - created_at = %v, want %v (from the database clock)", p.Name, d, p.Delay)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// serverRefusedRow names, in lineUp, a submit whose payload the server
// refuses: submitServerRefused sends it past Submit's own checks, which
// refuse every such value before it is written.
const serverRefusedRow = "server-refused"

// submitServerRefused submits, through the insert groups, a row whose
// payload jsonb cannot hold (a NUL character). Submit refuses it before
// any write; the groups must still cope with a row the server refuses,
// as an executor mangling values would produce.
func submitServerRefused(ctx context.Context, be *pgBackend) (*cairnqtype.Task, error) {
	ins, err := insertArgs(SubmitParams{Name: serverRefusedRow}, time.Now())
	if err != nil {
		return nil, err
	}
	ins.payload = `{"s": "nul\u0000here"}`
	return be.insertGrouped(ctx, ins)
}

// A row the server refuses fails only its own submit: the group's
// statement is rejected as a whole, then every submit runs alone.
func TestInsertGroupRejectedRowFailsOnlyItsOwnSubmit(t *testing.T) {
	s, g := openGatedPG(t)
	ctx := t.Context()
	rest := []SubmitParams{{Name: "good-1"}, {Name: serverRefusedRow}, {Name: "good-2"}}
	out := lineUp(t, ctx, s, g, SubmitParams{Name: "first"}, rest)
	if n := g.count(g.many); n != 1 {
		t.Errorf("insert_many ran %d times, want 1", n)
	}
	if n := g.count(g.single); n != 1+len(rest) {
		t.Errorf("insert_task ran %d times, want %d (the first, then each of the rejected group alone)", n, 1+len(rest))
	}
	for _, o := range out {
		if o.p.Name == serverRefusedRow {
			if o.err == nil || !rowsRefused(o.err) {
				t.Fatalf("bad submit: err = %v, want the server's refusal", o.err)
			}
			continue
		}
		if o.err != nil {
			t.Fatalf("%s: %v", o.p.Name, o.err)
		}
		checkSubmitted(t, o.p, o.t)
	}
	stats, err := s.Stats(ctx, cairnqtype.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if q := stats[cairnqtype.DefaultQueue].Queued; q != 3 {
		t.Fatalf("%d tasks queued, want 3 (first, good-1, good-2)", q)
	}
}

// A caller that gives up while its submit waits behind a flush returns
// the context's error, and its task is never written.
func TestInsertGroupAbandonedSubmitNeverLands(t *testing.T) {
	s, g := openGatedPG(t)
	ctx := t.Context()
	be := s.be.(*pgBackend)
	firstDone := make(chan error, 1)
	go func() {
		_, err := s.Submit(ctx, SubmitParams{Name: "first"})
		firstDone <- err
	}()
	<-g.arrived
	gaveUp, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() {
		_, err := s.Submit(gaveUp, SubmitParams{Name: "abandoned"})
		abandoned <- err
	}()
	waitFor(t, "the second submit queued", func() bool { return be.inserter.Waiting() == 1 })
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned submit: err = %v, want context.Canceled", err)
	}
	close(g.gateOpen)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	// The flusher has taken the abandoned request off the queue once this
	// submit, queued after it, returns.
	if _, err := s.Submit(ctx, SubmitParams{Name: "after"}); err != nil {
		t.Fatal(err)
	}
	tasks, err := s.List(ctx, cairnqtype.ListOptions{Name: "abandoned"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 0 {
		t.Fatalf("the abandoned submit was written: %+v", tasks[0])
	}
}

// insertColumns are exactly insert_task's parameters (but for the clock
// SQLite's statements are given, bindClock), and insert_many takes each
// as each_X: a parameter added to one statement and not the other fails
// here rather than as a missing argument at run time.
func TestInsertColumnsMatchTheStatements(t *testing.T) {
	var names, each []string
	for _, c := range insertColumns {
		names = append(names, c.name)
		each = append(each, "each_"+c.name)
	}
	slices.Sort(names)
	slices.Sort(each)
	for _, d := range []protocol.Dialect{protocol.Postgres, protocol.SQLite} {
		var params []string
		for _, p := range protocol.Statements(d).Get(stmtInsertTask).Params {
			switch p {
			case "now_ms":
			case "run_at_ms": // bindClock's, from delay_ms
				params = append(params, "delay_ms")
			default:
				params = append(params, p)
			}
		}
		slices.Sort(params)
		if !slices.Equal(params, names) {
			t.Errorf("%v insert_task takes %v, insertColumns lists %v", d, params, names)
		}
	}
	many := slices.Clone(protocol.Statements(protocol.Postgres).Get(stmtInsertMany).Params)
	slices.Sort(many)
	if !slices.Equal(many, each) {
		t.Errorf("insert_many takes %v, want %v", many, each)
	}
	ins, err := insertArgs(SubmitParams{Name: "n", Payload: 1, SubmitOptions: cairnqtype.SubmitOptions{Queue: "q", MaxAttempts: 2, Priority: -3, Delay: time.Second, Metadata: map[string]any{}, ParentID: "p", CorrelationID: "c"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	args, _ := insertManyArgs([]*insertRow{ins})
	want := map[string]string{"each_name": `{"n"}`, "each_queue": `{"q"}`, "each_payload": `{"1"}`, "each_metadata": `{"{}"}`,
		"each_max_attempts": `{"2"}`, "each_priority": `{"-3"}`, "each_delay_ms": `{"1000"}`, "each_parent_id": `{"p"}`,
		"each_root_id": `{"` + ins.id + `"}`, "each_correlation_id": `{"c"}`, "each_id": `{"` + ins.id + `"}`}
	for k, v := range want {
		if args[k] != v {
			t.Errorf("%s = %v, want %s", k, args[k], v)
		}
	}
	if got := ins.args(); got["parent_id"] != "p" || got["priority"] != int64(-3) || (&insertRow{}).args()["parent_id"] != nil {
		t.Errorf("insert_task's arguments %v; an empty parent id must bind NULL", got)
	}
}

// A submit whose caller gives up after its statement started ends with its
// caller, as a statement of its own would: the statement is canceled and
// nothing is written.
func TestInsertGroupStartedSubmitEndsWithItsCaller(t *testing.T) {
	s, g := openGatedPG(t)
	ctx := t.Context()
	gaveUp, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Submit(gaveUp, SubmitParams{Name: "started"})
		done <- err
	}()
	<-g.arrived // its insert_task holds the gate: the group has started
	cancel()
	// The caller's cancel reaches the group's context through an
	// AfterFunc, on a goroutine of its own: the statement sees it once
	// that has run.
	g.mu.Lock()
	stmtCtx := g.last
	g.mu.Unlock()
	waitFor(t, "the statement's context to end", func() bool { return stmtCtx.Err() != nil })
	close(g.gateOpen)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	tasks, err := s.List(ctx, cairnqtype.ListOptions{Name: "started"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 0 {
		t.Fatalf("the canceled submit was written: %+v", tasks[0])
	}
}

// Closing the store while submits wait behind a flush ends every one of
// them with ErrClosed or the in-flight statement's own error, and Close
// returns.
func TestInsertGroupCloseEndsWaitingSubmits(t *testing.T) {
	s, g := openGatedPG(t)
	ctx := t.Context()
	be := s.be.(*pgBackend)
	errs := make(chan error, 2)
	inFlight := make(chan error, 1)
	go func() {
		_, err := s.Submit(ctx, SubmitParams{Name: "in-flight"})
		inFlight <- err
	}()
	<-g.arrived
	for _, name := range []string{"queued-1", "queued-2"} {
		go func() {
			_, err := s.Submit(ctx, SubmitParams{Name: name})
			errs <- err
		}()
	}
	waitFor(t, "two submits queued", func() bool { return be.inserter.Waiting() == 2 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitFor(t, "the grouper to be told to stop", be.inserter.Closing)
	close(g.gateOpen)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The statement already sent finishes: its caller, whose context is
	// live, gets its task rather than "context canceled".
	if err := <-inFlight; err != nil {
		t.Fatalf("the submit in flight when Close began: %v, want its task", err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, cairnqtype.ErrClosed) {
			t.Fatalf("a queued submit on a closing store: %v, want ErrClosed", err)
		}
	}
}

// waitFor polls cond until it holds, failing t after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
