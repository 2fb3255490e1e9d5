package protocol

import (
	"database/sql/driver"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
)

// Args carries a statement's arguments by parameter name. Callers pass one
// dialect-neutral superset (for example both now_ms and lease_ms); each
// statement binds only the names it uses. A list-valued parameter takes
// either the dialect's list form or One(v).
type Args map[string]any

// One marks the argument of a list-valued parameter (claim's queues and
// names) as a list of exactly v. Specialize rewrites the statement's list
// filters on that parameter to col = :p, which lets the planner seek the
// index on col rather than read every entry the list could match, and Bind
// binds v itself. Bind refuses a One the statement was not specialized for,
// since a single value where the text takes a list would fail or match
// the wrong rows.
func One(v any) any { return oneValue{v} }

// oneValue is an argument marked by One.
type oneValue struct{ v any }

// Statement is one compiled protocol statement. Its exported fields are
// read-only once compiled; a *Statement is safe for concurrent use.
type Statement struct {
	// Name is the statement's name, e.g. "claim", the base name of its
	// file sql/<dialect>/<name>.sql.
	Name string
	// Dialect is the dialect SQL is written for.
	Dialect Dialect
	// SQL is the compiled text: placeholders ?1..?N on SQLite and $1..$N on
	// Postgres, where N is len(Params). A name used twice reuses its number.
	SQL string
	// Params holds the unique parameter names in first-use order; Params[i]
	// is placeholder i+1.
	Params []string
	// Write is false only for a plain read, i.e. a statement whose first
	// keyword is SELECT or VALUES. The SQLite store routes writes to its
	// writer connection.
	Write bool

	src     string     // the :name source text
	filters []filter   // the root statement's filters, in text order
	mask    uint32     // which of root's filters this statement has rewritten
	single  []bool     // per Params entry: rewritten for a One argument
	root    *Statement // the statement this one specializes; nil if none
	memo    []memoSlot // root only: one slot per subset of filters
}

type memoSlot struct{ p atomic.Pointer[Statement] }

// missingParamError reports a parameter a statement needs that the
// arguments did not carry at all. (A parameter present with a nil value
// binds NULL.) It is a defect in the caller, not a condition to handle,
// hence not exported.
type missingParamError struct {
	statement, param string
}

func (e *missingParamError) Error() string {
	return fmt.Sprintf("protocol: statement %q needs parameter %q, which the arguments do not carry", e.statement, e.param)
}

// Bind returns the positional arguments for args, in Params order, with
// One(v) bound as v. A parameter absent from args (key not present; a
// present nil is fine and binds NULL) is an error naming the statement and
// the parameter, and so is a One where s takes a list (Specialize s for
// args first) or a list where s was specialized for a One.
func (s *Statement) Bind(args Args) ([]any, error) {
	out := make([]any, len(s.Params))
	for i, p := range s.Params {
		v, ok := args[p]
		if !ok {
			return nil, &missingParamError{statement: s.Name, param: p}
		}
		o, isOne := v.(oneValue)
		if want := s.single != nil && s.single[i]; isOne != want {
			return nil, &oneError{statement: s.Name, param: p, specialized: want}
		}
		if isOne {
			v = o.v
		}
		out[i] = v
	}
	return out, nil
}

// oneError reports a One argument and a statement that disagree.
type oneError struct {
	statement, param string
	specialized      bool // s was specialized for a One and got a list
}

func (e *oneError) Error() string {
	if e.specialized {
		return fmt.Sprintf("protocol: statement %q is specialized for one %q; bind it with protocol.One", e.statement, e.param)
	}
	return fmt.Sprintf("protocol: statement %q takes a list for %q here: specialize it for the protocol.One argument first", e.statement, e.param)
}

// filterParams lists the parameters of the optional (list false) or list
// filters s has not rewritten, in text order, without repeats.
func (s *Statement) filterParams(list bool) []string {
	root := s.base()
	var names []string
	for i, f := range root.filters {
		if f.list == list && s.mask&(1<<i) == 0 && !slices.Contains(names, f.param) {
			names = append(names, f.param)
		}
	}
	return names
}

// Specialize returns the statement with its filters rewritten for args:
// every optional filter, (:p IS NULL OR col = :p), whose argument is
// non-nil becomes (col = :p), and every list filter whose argument is One
// becomes col = :p; other filters stay as they are. The result has the same
// Params as s, so Bind works on it unchanged.
//
// A value counts as nil when it is the nil interface, a nil pointer, or a
// driver.Valuer whose Value is nil: whatever the driver would bind as NULL.
// Rewriting such a filter to an equality would match nothing.
//
// Results are memoized per set of active filters, so after the first call
// for a given set no allocation happens. It returns s itself when no filter
// is active. On an already specialized statement the filters it rewrote stay
// rewritten. Safe for concurrent use.
func (s *Statement) Specialize(args Args) *Statement {
	root := s.base()
	mask := s.mask
	for i, f := range root.filters {
		if mask&(1<<i) == 0 && f.active(args[f.param]) {
			mask |= 1 << i
		}
	}
	if mask == s.mask {
		return s
	}
	slot := &root.memo[mask].p
	if p := slot.Load(); p != nil {
		return p
	}
	built := root.rewrite(mask)
	if slot.CompareAndSwap(nil, built) {
		return built
	}
	return slot.Load()
}

func (s *Statement) base() *Statement {
	if s.root != nil {
		return s.root
	}
	return s
}

// rewrite builds root's text with the filters in mask replaced by
// equalities, and notes which parameters Bind must take as One.
func (s *Statement) rewrite(mask uint32) *Statement {
	var b strings.Builder
	b.Grow(len(s.SQL))
	prev := 0
	for i, f := range s.filters {
		if mask&(1<<i) == 0 {
			continue
		}
		b.WriteString(s.SQL[prev:f.start])
		b.WriteString(f.repl)
		prev = f.end
	}
	b.WriteString(s.SQL[prev:])
	var single []bool
	for i, f := range s.filters {
		if f.list && mask&(1<<i) != 0 {
			if single == nil {
				single = make([]bool, len(s.Params))
			}
			single[slices.Index(s.Params, f.param)] = true
		}
	}
	return &Statement{
		Name:    s.Name,
		Dialect: s.Dialect,
		SQL:     b.String(),
		Params:  s.Params,
		Write:   s.Write,
		src:     s.src,
		mask:    mask,
		single:  single,
		root:    s,
	}
}

// isNull reports whether a driver would bind v as NULL.
func isNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string, int, int64, int32, float64, bool, []byte:
		return false
	case driver.Valuer:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return true
		}
		x, err := v.Value()
		return err == nil && x == nil
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
