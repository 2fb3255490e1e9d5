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
	var missing *missingParamError
	if !errors.As(err, &missing) {
		t.Fatalf("Bind without a: err = %v, want *missingParamError", err)
	}
	if missing.statement != "bind_me" || missing.param != "a" {
		t.Errorf("missingParamError = %+v", missing)
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
			if got := st.filterParams(false); !slices.Equal(got, c.filters) {
				t.Errorf("optional filters = %q, want %q", got, c.filters)
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
	if got := a.filterParams(false); !slices.Equal(got, []string{"b"}) {
		t.Errorf("specialized optional filters = %q, want [b]", got)
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
	st := Statements(SQLite).Get("list")
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
	st := Statements(SQLite).Get("list")
	args := Args{"status": "queued", "queue": nil, "name": "n", "root_id": nil, "correlation_id": nil, "limit": 10, "offset": 0}
	st.Specialize(args) // warm the memo
	if n := testing.AllocsPerRun(200, func() { st.Specialize(args) }); n != 0 {
		t.Errorf("memoized Specialize allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(200, func() { st.Specialize(Args{}) }); n != 0 {
		t.Errorf("inactive Specialize allocates %v times per call", n)
	}
}

func TestListFilterShapes(t *testing.T) {
	const (
		liteIn  = "IN (SELECT value FROM json_each(:q))"
		liteOpt = "(:q IS NULL OR name IN (SELECT value FROM json_each(:q)))"
		pgAny   = "= ANY (:q::text[])"
		pgOpt   = "(:q::text[] IS NULL OR name = ANY (:q::text[]))"
	)
	cases := []struct {
		name    string
		dialect Dialect
		src     string
		want    string // specialized for One(q); "" when nothing is a list filter
	}{
		{"sqlite list", SQLite, "SELECT 1 FROM t WHERE queue " + liteIn + " AND x = :x", "SELECT 1 FROM t WHERE queue = ?1 AND x = ?2"},
		{"sqlite optional list", SQLite, "SELECT 1 FROM t WHERE x = :x AND " + liteOpt, "SELECT 1 FROM t WHERE x = ?1 AND name = ?2"},
		{"postgres list", Postgres, "SELECT 1 FROM t WHERE queue " + pgAny + " AND x = :x", "SELECT 1 FROM t WHERE queue = $1 AND x = $2"},
		{"postgres optional list", Postgres, "SELECT 1 FROM t WHERE x = :x AND " + pgOpt, "SELECT 1 FROM t WHERE x = $1 AND name = $2"},
		{"keywords any case, free whitespace", SQLite, "select 1 from t where queue in ( select VALUE from JSON_EACH( :q ) )", "select 1 from t where queue = ?1"},
		{"postgres free whitespace", Postgres, "SELECT 1 WHERE ( :q :: text [ ] is null or name=any(:q::TEXT[]) )", "SELECT 1 WHERE name = $1"},
		{"qualified column", Postgres, "SELECT 1 FROM t WHERE t.queue " + pgAny, "SELECT 1 FROM t WHERE t.queue = $1"},
		{"quoted column", SQLite, `SELECT 1 FROM t WHERE "queue" ` + liteIn, `SELECT 1 FROM t WHERE "queue" = ?1`},
		{"after NOT", SQLite, "SELECT 1 FROM t WHERE NOT queue " + liteIn, "SELECT 1 FROM t WHERE NOT queue = ?1"},
		{"between ORs", Postgres, "SELECT 1 WHERE a OR queue " + pgAny + " OR b", "SELECT 1 WHERE a OR queue = $1 OR b"},
		{"in parentheses", SQLite, "SELECT 1 WHERE (queue " + liteIn + ")", "SELECT 1 WHERE (queue = ?1)"},
		{"before ORDER", SQLite, "SELECT 1 FROM t WHERE queue " + liteIn + " ORDER BY id", "SELECT 1 FROM t WHERE queue = ?1 ORDER BY id"},
		{"before LIMIT", Postgres, "SELECT 1 FROM t WHERE " + pgOpt + " LIMIT 1", "SELECT 1 FROM t WHERE name = $1 LIMIT 1"},
		{"word right after", SQLite, "SELECT 1 WHERE queue " + liteIn + "AND x", "SELECT 1 WHERE queue = ?1 AND x"},
		{"before RETURNING", SQLite, "DELETE FROM t WHERE queue " + liteIn + " RETURNING id", "DELETE FROM t WHERE queue = ?1 RETURNING id"},

		// An operator next to it would bind differently around an equality.
		{"after an operator", SQLite, "SELECT 1 WHERE 1 + queue " + liteIn, ""},
		{"after a qualifier only", SQLite, "SELECT 1 WHERE t.\"a\".queue " + liteIn, ""},
		{"before an operator", SQLite, "SELECT 1 WHERE queue " + liteIn + " = 0", ""},
		{"before IS", Postgres, "SELECT 1 WHERE " + pgOpt + " IS TRUE", ""},
		{"before a cast", Postgres, "SELECT 1 WHERE (queue " + pgAny + ")::int = 1", "SELECT 1 WHERE (queue = $1)::int = 1"},
		{"optional after an operator", Postgres, "SELECT 1 WHERE 1 = " + pgOpt, ""},
		{"statement start", SQLite, "queue " + liteIn, ""},

		// Near misses of the shapes.
		{"NOT IN", SQLite, "SELECT 1 WHERE queue NOT " + liteIn, ""},
		{"other table function", SQLite, "SELECT 1 WHERE queue IN (SELECT value FROM json_tree(:q))", ""},
		{"other column of json_each", SQLite, "SELECT 1 WHERE queue IN (SELECT key FROM json_each(:q))", ""},
		{"postgres needs the array cast", Postgres, "SELECT 1 WHERE queue = ANY (:q)", ""},
		{"postgres other array type", Postgres, "SELECT 1 WHERE queue = ANY (:q::int[])", ""},
		{"postgres ALL", Postgres, "SELECT 1 WHERE queue = ALL (:q::text[])", ""},
		{"postgres other operator", Postgres, "SELECT 1 WHERE queue <> ANY (:q::text[])", ""},
		{"postgres scalar null test", Postgres, "SELECT 1 WHERE (:q::text IS NULL OR name = ANY (:q::text[]))", ""},
		{"different params: the inner list alone", SQLite, "SELECT 1 WHERE (:x IS NULL OR name IN (SELECT value FROM json_each(:q)))",
			"SELECT 1 WHERE (?1 IS NULL OR name = ?2)"},
		{"postgres shape on sqlite", SQLite, "SELECT 1 WHERE queue = ANY (:q)", ""},
		{"sqlite shape on postgres", Postgres, "SELECT 1 WHERE queue " + liteIn, ""},
		{"parameter also used elsewhere", SQLite, "SELECT json_array_length(:q) WHERE queue " + liteIn, ""},
		{"inside a string", SQLite, "SELECT 'WHERE queue " + liteIn + "', :q", ""},
		{"inside a comment", Postgres, "SELECT :q -- WHERE queue " + pgAny, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Compile("l", c.src, c.dialect)
			if err != nil {
				t.Fatal(err)
			}
			args := Args{"q": One("v"), "r": One("w"), "x": 1}
			sp := st.Specialize(args)
			if c.want == "" {
				if sp != st || len(st.filterParams(true)) != 0 {
					t.Fatalf("took %q for a list filter: %q", c.src, sp.SQL)
				}
				if _, err := st.Bind(args); err == nil {
					t.Error("Bind took One for a list it cannot stand for")
				}
				return
			}
			if sp.SQL != c.want {
				t.Errorf("SQL = %q, want %q", sp.SQL, c.want)
			}
			if !slices.Equal(sp.Params, st.Params) {
				t.Errorf("Params = %q, want %q", sp.Params, st.Params)
			}
			if got := st.filterParams(true); !slices.Equal(got, []string{"q"}) {
				t.Errorf("list filters = %q, want [q]", got)
			}
			bound, err := sp.Bind(args)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.Index(sp.Params, "q"); bound[i] != "v" {
				t.Errorf("Bind = %v, want v unwrapped at %d", bound, i)
			}
		})
	}
}

func TestSpecializeListFilters(t *testing.T) {
	src := "SELECT * FROM t WHERE queue IN (SELECT value FROM json_each(:queues))" +
		" AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))" +
		" AND (:status IS NULL OR status = :status)"
	st, err := Compile("spec", src, SQLite)
	if err != nil {
		t.Fatal(err)
	}
	const (
		list   = "queue IN (SELECT value FROM json_each(?1))"
		names  = "(?2 IS NULL OR name IN (SELECT value FROM json_each(?2)))"
		status = "(?3 IS NULL OR status = ?3)"
	)
	sql := func(parts ...string) string { return "SELECT * FROM t WHERE " + strings.Join(parts, " AND ") }
	cases := []struct {
		name string
		args Args
		sql  string
	}{
		{"lists stay lists", Args{"queues": `["a","b"]`, "names": `["n"]`, "status": nil}, sql(list, names, status)},
		{"a nil list stays", Args{"queues": `["a"]`, "names": nil}, sql(list, names, status)},
		{"one queue", Args{"queues": One("a"), "names": nil}, sql("queue = ?1", names, status)},
		{"one name", Args{"queues": `["a"]`, "names": One("n")}, sql(list, "name = ?2", status)},
		{"one of each and a status", Args{"queues": One("a"), "names": One("n"), "status": "queued"},
			sql("queue = ?1", "name = ?2", "(status = ?3)")},
		{"One(nil) is still one value", Args{"queues": One(nil), "names": nil}, sql("queue = ?1", names, status)},
		{"One on an optional filter rewrites nothing", Args{"status": One("queued")}, sql(list, names, status)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := st.Specialize(c.args)
			if got.SQL != c.sql {
				t.Errorf("SQL = %q\nwant  %q", got.SQL, c.sql)
			}
			if again := st.Specialize(c.args); again != got {
				t.Error("second call returned a different pointer; not memoized")
			}
		})
	}

	one := st.Specialize(Args{"queues": One("a")})
	if one.Specialize(Args{"names": One("n")}) != st.Specialize(Args{"queues": One("a"), "names": One("n")}) {
		t.Error("the same filter set reached two ways must share one memo entry")
	}
	if got := one.filterParams(true); !slices.Equal(got, []string{"names"}) {
		t.Errorf("list filters left = %q, want [names]", got)
	}

	// Bind holds the argument to what the text takes.
	bound, err := one.Bind(Args{"queues": One("a"), "names": `["n"]`, "status": nil})
	if err != nil || !slices.Equal(bound, []any{"a", `["n"]`, nil}) {
		t.Errorf("Bind = %v, %v; want [a [\"n\"] <nil>]", bound, err)
	}
	if bound, err := one.Bind(Args{"queues": One(nil), "names": nil, "status": nil}); err != nil || bound[0] != nil {
		t.Errorf("Bind One(nil) = %v, %v; want NULL", bound, err)
	}
	for _, c := range []struct {
		name string
		st   *Statement
		args Args
		want string
	}{
		{"One into a list", st, Args{"queues": One("a"), "names": nil, "status": nil}, "takes a list"},
		{"a list into the equality", one, Args{"queues": `["a"]`, "names": nil, "status": nil}, "specialized for one"},
		{"One into a scalar", st, Args{"queues": `["a"]`, "names": nil, "status": One("queued")}, "takes a list"},
	} {
		_, err := c.st.Bind(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"spec"`) {
			t.Errorf("%s: Bind err = %v, want one naming the statement and saying %q", c.name, err, c.want)
		}
	}
}

func TestSpecializeListPostgres(t *testing.T) {
	src := "SELECT 1 FROM t WHERE queue = ANY (:queues::text[]) AND (:names::text[] IS NULL OR name = ANY (:names::text[])) AND n = :n"
	st, err := Compile("spec", src, Postgres)
	if err != nil {
		t.Fatal(err)
	}
	got := st.Specialize(Args{"queues": One("default"), "names": One("send"), "n": 1})
	if want := "SELECT 1 FROM t WHERE queue = $1 AND name = $2 AND n = $3"; got.SQL != want {
		t.Errorf("SQL = %q, want %q", got.SQL, want)
	}
	if got := st.Specialize(Args{"queues": `{"a","b"}`, "names": nil}); got != st {
		t.Errorf("lists must stay lists: %q", got.SQL)
	}
}

func TestSpecializeOneAllocatesNothing(t *testing.T) {
	st := Statements(SQLite).Get("claim")
	args := Args{"queues": One("q"), "names": One("n")}
	st.Specialize(args) // warm the memo
	if n := testing.AllocsPerRun(200, func() { st.Specialize(args) }); n != 0 {
		t.Errorf("memoized Specialize allocates %v times per call", n)
	}
}
