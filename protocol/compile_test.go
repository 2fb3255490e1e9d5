package protocol

import (
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestCompile(t *testing.T) {
	cases := []struct {
		name    string
		dialect Dialect
		src     string
		sql     string
		params  []string
	}{
		// Numbering and repetition.
		{"numbered in first-use order", SQLite, "SELECT :b, :a", "SELECT ?1, ?2", []string{"b", "a"}},
		{"repeat reuses number sqlite", SQLite, "SELECT :a, :b, :a", "SELECT ?1, ?2, ?1", []string{"a", "b"}},
		{"repeat reuses number postgres", Postgres, "SELECT :a, :b, :a", "SELECT $1, $2, $1", []string{"a", "b"}},
		{"no params", SQLite, "SELECT 1", "SELECT 1", nil},
		{"name chars", SQLite, "SELECT :_x9, :A_b", "SELECT ?1, ?2", []string{"_x9", "A_b"}},

		// String literals.
		{"string hides param", SQLite, "SELECT ':a', :b", "SELECT ':a', ?1", []string{"b"}},
		{"doubled quote stays inside", SQLite, "SELECT 'it''s :a', :b", "SELECT 'it''s :a', ?1", []string{"b"}},
		{"empty string", Postgres, "SELECT '', :b", "SELECT '', $1", []string{"b"}},
		{"sqlite backslash is not an escape", SQLite, `SELECT 'a\', :b`, `SELECT 'a\', ?1`, []string{"b"}},
		{"postgres plain backslash is not an escape", Postgres, `SELECT 'a\', :b`, `SELECT 'a\', $1`, []string{"b"}},
		{"postgres E string backslash quote", Postgres, `SELECT E'\':a', :b`, `SELECT E'\':a', $1`, []string{"b"}},
		{"postgres e string escaped backslash", Postgres, `SELECT e'x\\', :a`, `SELECT e'x\\', $1`, []string{"a"}},
		{"postgres E string doubled quote", Postgres, `SELECT E'it''s :a', :b`, `SELECT E'it''s :a', $1`, []string{"b"}},
		{"sqlite E is just a word", SQLite, `SELECT E'\', :a`, `SELECT E'\', ?1`, []string{"a"}},
		{"postgres word ending in E is no E string", Postgres, `SELECT somE'\', :a`, `SELECT somE'\', $1`, []string{"a"}},
		{"string spans lines", Postgres, "SELECT ':a\n  :b', :c", "SELECT ':a\n  :b', $1", []string{"c"}},
		{"newline between strings survives", Postgres, "SELECT 'a'\n   'b', :c", "SELECT 'a'\n'b', $1", []string{"c"}},

		// Quoted identifiers.
		{"double quoted identifier", SQLite, `SELECT ":a" FROM t WHERE x = :b`, `SELECT ":a" FROM t WHERE x = ?1`, []string{"b"}},
		{"doubled double quote", Postgres, `SELECT "a"":b", :c`, `SELECT "a"":b", $1`, []string{"c"}},
		{"sqlite backtick identifier", SQLite, "SELECT `:a`, :b", "SELECT `:a`, ?1", []string{"b"}},
		{"sqlite bracket identifier", SQLite, "SELECT [:a], :b", "SELECT [:a], ?1", []string{"b"}},
		{"postgres bracket is subscript", Postgres, "SELECT arr[:i], :b", "SELECT arr[$1], $2", []string{"i", "b"}},

		// Comments.
		{"line comment", SQLite, "SELECT 1 -- :a\n, :b", "SELECT 1\n, ?1", []string{"b"}},
		{"line comment at end", Postgres, "SELECT :b -- :a", "SELECT $1", []string{"b"}},
		{"block comment", SQLite, "SELECT /* :a */ :b", "SELECT ?1", []string{"b"}},
		{"block comment separates tokens", SQLite, "SELECT 1/**/AS x", "SELECT 1 AS x", nil},
		{"block comment keeps operators apart", Postgres, "SELECT 1 -/**/- 1", "SELECT 1 - - 1", nil},
		{"block comment with newline", SQLite, "SELECT 1/*\n*/AS x", "SELECT 1\nAS x", nil},
		{"sqlite block comments do not nest", SQLite, "SELECT /* /* */ :a", "SELECT ?1", []string{"a"}},
		{"postgres block comments nest", Postgres, "SELECT /* a /* :x */ :y */ :z", "SELECT $1", []string{"z"}},
		{"quote inside comment", SQLite, "SELECT 1 -- it's\n, :a", "SELECT 1\n, ?1", []string{"a"}},
		{"comment marker inside string", SQLite, "SELECT '--', '/*', :a", "SELECT '--', '/*', ?1", []string{"a"}},

		// Casts.
		{"param then cast", Postgres, "SELECT :p::text, :p", "SELECT $1::text, $1", []string{"p"}},
		{"array cast", Postgres, "SELECT :p::text[]", "SELECT $1::text[]", []string{"p"}},
		{"cast of column", Postgres, "SELECT x::int, :a", "SELECT x::int, $1", []string{"a"}},
		{"cast of literal", Postgres, "SELECT '{}'::jsonb, :a", "SELECT '{}'::jsonb, $1", []string{"a"}},
		{"cast right after param name", Postgres, "SELECT :a::bigint + :b::bigint", "SELECT $1::bigint + $2::bigint", []string{"a", "b"}},

		// Dollar quoting.
		{"dollar body", Postgres, "SELECT $$ :a ' $$, :b", "SELECT $$ :a ' $$, $1", []string{"b"}},
		{"tagged dollar body", Postgres, "SELECT $fn$ $$ :a -- $fn$, :b", "SELECT $fn$ $$ :a -- $fn$, $1", []string{"b"}},
		{"dollar body keeps whitespace", Postgres, "SELECT $$a\n\n  b$$", "SELECT $$a\n\n  b$$", nil},
		{"dollar inside identifier", Postgres, "SELECT a$b, :x", "SELECT a$b, $1", []string{"x"}},

		// Other Postgres operators the SQLite rules would reject.
		{"postgres jsonb ? operator", Postgres, "SELECT payload ? 'k' FROM t WHERE id = :id", "SELECT payload ? 'k' FROM t WHERE id = $1", []string{"id"}},
		{"postgres @> operator", Postgres, "SELECT a @> b, :x", "SELECT a @> b, $1", []string{"x"}},
		{"postgres # operator", Postgres, "SELECT 1 # 2, :x", "SELECT 1 # 2, $1", []string{"x"}},
		{"postgres slice", Postgres, "SELECT arr[1:2], :x", "SELECT arr[1:2], $1", []string{"x"}},
		{"postgres named argument", Postgres, "SELECT f(a := 1, b => 2), :x", "SELECT f(a := 1, b => 2), $1", []string{"x"}},

		// Layout.
		{"whitespace collapses", SQLite, "SELECT\n\n   :a ,\t:b", "SELECT\n?1 , ?2", []string{"a", "b"}},
		{"trailing semicolons dropped", SQLite, "SELECT :a; -- done\n;\n", "SELECT ?1", []string{"a"}},
		{"leading comment dropped", Postgres, "-- header :x\n/* more */\nSELECT :a", "SELECT $1", []string{"a"}},
		{"param after identifier is kept apart", Postgres, "SELECT x:a", "SELECT x $1", []string{"a"}},
		{"param after paren", SQLite, "SELECT f(:a)", "SELECT f(?1)", []string{"a"}},
		{"semicolon inside string", SQLite, "SELECT ';', :a", "SELECT ';', ?1", []string{"a"}},
		{"semicolon inside dollar body", Postgres, "SELECT $$;$$", "SELECT $$;$$", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Compile("t", c.src, c.dialect)
			if err != nil {
				t.Fatalf("Compile(%q): %v", c.src, err)
			}
			if st.SQL != c.sql {
				t.Errorf("SQL = %q, want %q", st.SQL, c.sql)
			}
			if !slices.Equal(st.Params, c.params) {
				t.Errorf("Params = %q, want %q", st.Params, c.params)
			}
			if st.Name != "t" || st.Dialect != c.dialect {
				t.Errorf("Name, Dialect = %q, %q", st.Name, st.Dialect)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name    string
		dialect Dialect
		src     string
		want    string // substring of the error
	}{
		{"unterminated string", SQLite, "SELECT 'abc", "unterminated string literal"},
		{"unterminated string pg", Postgres, "SELECT 'it''s", "unterminated string literal"},
		{"unterminated E string", Postgres, `SELECT E'abc\'`, "unterminated string literal"},
		{"E string escape swallows quote", Postgres, `SELECT E'\', :a`, "unterminated string literal"},
		{"unterminated identifier", SQLite, `SELECT "abc`, "unterminated quoted identifier"},
		{"unterminated backtick", SQLite, "SELECT `abc", "unterminated quoted identifier"},
		{"unterminated bracket", SQLite, "SELECT [abc", "unterminated quoted identifier"},
		{"unterminated block comment", SQLite, "SELECT 1 /* x", "unterminated block comment"},
		{"unterminated nested comment", Postgres, "SELECT /* /* */ :a", "unterminated block comment"},
		{"unterminated dollar body", Postgres, "SELECT $$ abc", "unterminated dollar-quoted string"},
		{"unterminated tagged body", Postgres, "SELECT $a$ abc $b$", "unterminated dollar-quoted string"},
		{"sqlite ?", SQLite, "SELECT ?", "driver placeholder \"?\""},
		{"sqlite ?N", SQLite, "SELECT ?12", "driver placeholder \"?12\""},
		{"sqlite $x", SQLite, "SELECT $x", "driver placeholder \"$x\""},
		{"sqlite @x", SQLite, "SELECT @x", "driver placeholder \"@x\""},
		{"sqlite #x", SQLite, "SELECT #x", "driver placeholder \"#x\""},
		{"sqlite :N", SQLite, "SELECT :1", "driver placeholder \":1\""},
		{"postgres $N", Postgres, "SELECT $1", "driver placeholder \"$1\""},
		{"malformed name", SQLite, "SELECT :a$", "malformed parameter name"},
		{"malformed name pg", Postgres, "SELECT :$a", "malformed parameter name"},
		{"non-ASCII name", Postgres, "SELECT :aé", "malformed parameter name"},
		{"two statements", SQLite, "SELECT 1; SELECT :a", "more than one statement"},
		{"empty", Postgres, "-- nothing\n;", "empty statement"},
		{"blank", SQLite, "", "empty statement"},
		{"unknown dialect", Dialect("oracle"), "SELECT 1", "unknown dialect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Compile("my_stmt", c.src, c.dialect)
			if err == nil {
				t.Fatalf("Compile(%q) = %q, want error", c.src, st.SQL)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if !strings.Contains(err.Error(), `"my_stmt"`) {
				t.Errorf("error %q does not name the statement", err)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	cases := []struct {
		src   string
		write bool
	}{
		{"SELECT 1", false},
		{"select 1", false},
		{"-- c\n(SELECT 1) UNION (SELECT 2)", false},
		{"VALUES (1)", false},
		{"UPDATE t SET a = 1", true},
		{"INSERT INTO t VALUES (1)", true},
		{"DELETE FROM t", true},
		{"WITH x AS (SELECT 1) SELECT * FROM x", true}, // conservative: could front a write
	}
	for _, c := range cases {
		st, err := Compile("w", c.src, SQLite)
		if err != nil {
			t.Fatal(err)
		}
		if st.Write != c.write {
			t.Errorf("Compile(%q).Write = %v, want %v", c.src, st.Write, c.write)
		}
	}
}

func TestBind(t *testing.T) {
	st, err := Compile("bind_me", "SELECT :b, :a, :b", SQLite)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Bind(Args{"a": 1, "b": "x", "extra": true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []any{"x", 1}) {
		t.Errorf("Bind = %v, want [x 1]", got)
	}

	got, err = st.Bind(Args{"a": nil, "b": nil})
	if err != nil {
		t.Fatalf("present nil must bind: %v", err)
	}
	if len(got) != 2 || got[0] != nil || got[1] != nil {
		t.Errorf("Bind = %v, want [<nil> <nil>]", got)
	}

	_, err = st.Bind(Args{"b": "x"})
	var missing *MissingParamError
	if !errors.As(err, &missing) {
		t.Fatalf("Bind without a: err = %v, want *MissingParamError", err)
	}
	if missing.Statement != "bind_me" || missing.Param != "a" {
		t.Errorf("MissingParamError = %+v", missing)
	}
	if msg := err.Error(); !strings.Contains(msg, `"bind_me"`) || !strings.Contains(msg, `"a"`) {
		t.Errorf("message %q must name statement and parameter", msg)
	}

	none, err := Compile("none", "SELECT 1", Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := none.Bind(nil); err != nil || len(got) != 0 {
		t.Errorf("Bind(nil) on a statement without params = %v, %v", got, err)
	}
}

func TestOptionalFilterShapes(t *testing.T) {
	cases := []struct {
		name    string
		dialect Dialect
		src     string
		filters []string
	}{
		{"sqlite shape", SQLite, "SELECT 1 WHERE (:p IS NULL OR col = :p)", []string{"p"}},
		{"keywords any case", SQLite, "SELECT 1 WHERE (:p is null or col = :p)", []string{"p"}},
		{"free whitespace", SQLite, "SELECT 1 WHERE ( :p\n IS NULL OR col=:p )", []string{"p"}},
		{"qualified column", SQLite, "SELECT 1 WHERE (:p IS NULL OR t.col = :p)", []string{"p"}},
		{"quoted column", SQLite, `SELECT 1 WHERE (:p IS NULL OR "col" = :p)`, []string{"p"}},
		{"postgres shape", Postgres, "SELECT 1 WHERE (:p::text IS NULL OR col = :p)", []string{"p"}},
		{"several, in order, no repeats", SQLite,
			"SELECT 1 WHERE (:b IS NULL OR x = :b) AND (:a IS NULL OR y = :a) AND (:b IS NULL OR z = :b)", []string{"b", "a"}},
		{"different params", SQLite, "SELECT 1 WHERE (:p IS NULL OR col = :q)", nil},
		{"list valued", SQLite, "SELECT 1 WHERE (:p IS NULL OR col IN (SELECT value FROM json_each(:p)))", nil},
		{"extra term", SQLite, "SELECT 1 WHERE (:p IS NULL OR col = :p AND x)", nil},
		{"other operator", SQLite, "SELECT 1 WHERE (:p IS NULL OR col <= :p)", nil},
		{"postgres needs the cast", Postgres, "SELECT 1 WHERE (:p IS NULL OR col = :p)", nil},
		{"postgres array cast", Postgres, "SELECT 1 WHERE (:p::text[] IS NULL OR col = ANY (:p::text[]))", nil},
		{"postgres other cast", Postgres, "SELECT 1 WHERE (:p::int IS NULL OR col = :p)", nil},
		{"sqlite has no cast", SQLite, "SELECT 1 WHERE (:p::text IS NULL OR col = :p)", nil},
		{"inside a string", SQLite, "SELECT '(:p IS NULL OR col = :p)', :p", nil},
		{"inside a comment", SQLite, "SELECT :p -- (:p IS NULL OR col = :p)", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Compile("f", c.src, c.dialect)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.OptionalFilters(); !slices.Equal(got, c.filters) {
				t.Errorf("OptionalFilters = %q, want %q", got, c.filters)
			}
		})
	}
}

func TestSpecialize(t *testing.T) {
	src := "SELECT * FROM t WHERE (:a IS NULL OR a = :a) AND (:b IS NULL OR x.b = :b) AND c = :c"
	st, err := Compile("spec", src, SQLite)
	if err != nil {
		t.Fatal(err)
	}
	const (
		none  = "SELECT * FROM t WHERE (?1 IS NULL OR a = ?1) AND (?2 IS NULL OR x.b = ?2) AND c = ?3"
		onlyA = "SELECT * FROM t WHERE (a = ?1) AND (?2 IS NULL OR x.b = ?2) AND c = ?3"
		onlyB = "SELECT * FROM t WHERE (?1 IS NULL OR a = ?1) AND (x.b = ?2) AND c = ?3"
		both  = "SELECT * FROM t WHERE (a = ?1) AND (x.b = ?2) AND c = ?3"
	)
	var nilPtr *string
	s := "v"
	cases := []struct {
		name string
		args Args
		sql  string
	}{
		{"all nil", Args{"a": nil, "b": nil, "c": 1}, none},
		{"absent stays", Args{"c": 1}, none},
		{"non-filter param ignored", Args{"a": nil, "b": nil, "c": nil}, none},
		{"a", Args{"a": "x", "b": nil}, onlyA},
		{"b", Args{"a": nil, "b": 0}, onlyB},
		{"both", Args{"a": "", "b": false}, both},
		{"typed nil pointer is null", Args{"a": nilPtr, "b": nil}, none},
		{"non-nil pointer is a value", Args{"a": &s}, onlyA},
		{"invalid NullString is null", Args{"a": sql.NullString{}, "b": sql.NullInt64{Valid: true}}, onlyB},
		{"valid NullString is a value", Args{"a": sql.NullString{String: "", Valid: true}}, onlyA},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := st.Specialize(c.args)
			if got.SQL != c.sql {
				t.Errorf("SQL = %q, want %q", got.SQL, c.sql)
			}
			if !slices.Equal(got.Params, st.Params) {
				t.Errorf("Params = %q, want %q", got.Params, st.Params)
			}
			if got.Name != st.Name || got.Dialect != st.Dialect || got.Write != st.Write {
				t.Errorf("identity fields changed: %+v", got)
			}
			if c.sql == none && got != st {
				t.Error("no active filter must return the statement itself")
			}
			if again := st.Specialize(c.args); again != got {
				t.Error("second call returned a different pointer; not memoized")
			}
		})
	}

	a := st.Specialize(Args{"a": 1})
	if got := a.OptionalFilters(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("specialized OptionalFilters = %q, want [b]", got)
	}
	if got := a.Specialize(Args{"a": nil, "b": nil}); got != a {
		t.Error("specializing with nothing new must return the same statement")
	}
	ab := a.Specialize(Args{"b": 2})
	if ab.SQL != both {
		t.Errorf("a then b: SQL = %q, want %q", ab.SQL, both)
	}
	if st.Specialize(Args{"a": 1, "b": 2}) != ab {
		t.Error("the same filter set reached two ways must share one memo entry")
	}
}

func TestSpecializePostgres(t *testing.T) {
	st, err := Compile("spec", "SELECT 1 WHERE (:q::text IS NULL OR queue = :q) AND n = :n", Postgres)
	if err != nil {
		t.Fatal(err)
	}
	got := st.Specialize(Args{"q": "default", "n": 1})
	if want := "SELECT 1 WHERE (queue = $1) AND n = $2"; got.SQL != want {
		t.Errorf("SQL = %q, want %q", got.SQL, want)
	}
}

func TestSpecializeConcurrent(t *testing.T) {
	st := Statements(SQLite).Get(StmtList)
	var wg sync.WaitGroup
	results := make([]*Statement, 64)
	for i := range results {
		wg.Go(func() {
			results[i] = st.Specialize(Args{"status": "queued", "root_id": "r"})
		})
	}
	wg.Wait()
	for _, r := range results {
		if r != results[0] {
			t.Fatal("concurrent Specialize calls returned different statements")
		}
	}
}

func TestSpecializeMemoizedAllocatesNothing(t *testing.T) {
	st := Statements(SQLite).Get(StmtList)
	args := Args{"status": "queued", "queue": nil, "name": "n", "root_id": nil, "correlation_id": nil, "limit": 10, "offset": 0}
	st.Specialize(args) // warm the memo
	if n := testing.AllocsPerRun(200, func() { st.Specialize(args) }); n != 0 {
		t.Errorf("memoized Specialize allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(200, func() { st.Specialize(Args{}) }); n != 0 {
		t.Errorf("inactive Specialize allocates %v times per call", n)
	}
}
