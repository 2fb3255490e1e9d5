package protocol

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzCompile checks the compiler's invariants on arbitrary input, in both
// dialects:
//   - it never panics;
//   - the compiled text re-tokenizes, holds no :name outside literals and no
//     comment, and its positional markers are exactly 1..len(Params);
//   - literals, quoted identifiers and dollar bodies come through verbatim and
//     in order, so no marker was put inside one;
//   - an independently written scanner finds the same parameters and literals;
//   - both dialects find the same parameters wherever they agree on what is
//     quoted and commented;
//   - fully specialized text keeps the same markers, and binds the arguments
//     it was specialized for while the unspecialized text refuses a One.
func FuzzCompile(f *testing.F) {
	for _, dir := range []string{"sql/sqlite", "sql/postgres", "migrations/sqlite", "migrations/postgres"} {
		entries, err := fs.ReadDir(files, dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			b, err := fs.ReadFile(files, dir+"/"+e.Name())
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"SELECT :a, :b, :a",
		"SELECT ':a''s', \":b\"\"\", :c",
		`SELECT E'\':x', e'\\', :y`,
		"SELECT /* /* :a */ :b */ :c",
		"SELECT $$ :a $$, $t$ $$ :b $t$, :c",
		"SELECT :p::text, x::int[], '{}'::jsonb",
		"SELECT 1 -- :a\n, :b; ;",
		"SELECT `:a`, [:b], :c",
		"WHERE (:p IS NULL OR col = :p) AND (:q::text IS NULL OR t.q = :q)",
		"WHERE q IN (SELECT value FROM json_each(:q)) AND (:n IS NULL OR n IN (SELECT value FROM json_each(:n))) LIMIT :l",
		"WHERE q = ANY (:q::text[]) AND (:n::text[] IS NULL OR t.n = ANY (:n::text[])) OR (x = ANY (:q::text[]))",
		"SELECT x:a, $:b, 1:c, :d$",
		"SELECT ?, ?1, $1, @a, #b, :1",
		"SELECT 'a'\n'b', arr[1:2], f(a := :v)",
		"SELECT '",
		"/*",
		"$$",
		"SELECT E'",
		"SELECT :é",
	} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, src string) {
		var got [2]*Statement
		for i, d := range []Dialect{SQLite, Postgres} {
			st, err := Compile("fuzz", src, d)
			if err != nil {
				if !strings.Contains(err.Error(), `"fuzz"`) {
					t.Fatalf("%s: error %q does not name the statement", d, err)
				}
				continue
			}
			got[i] = st
			checkCompiled(t, src, st)
			all := allFilters(st)
			sp := st.Specialize(all)
			checkCompiled(t, src, sp)
			checkBind(t, st, sp, all)
		}
		if got[0] == nil || got[1] == nil {
			if sameInBothDialects(src) && (got[0] == nil) != (got[1] == nil) {
				t.Fatalf("only one dialect compiles %q", src)
			}
			return
		}
		if sameInBothDialects(src) || sameSkips(src) {
			if !slices.Equal(got[0].Params, got[1].Params) {
				t.Fatalf("dialects disagree on params: sqlite %q, postgres %q", got[0].Params, got[1].Params)
			}
		}
	})
}

// checkCompiled verifies st against its source.
func checkCompiled(t *testing.T, src string, st *Statement) {
	t.Helper()
	toks, err := lex(st.SQL, st.Dialect)
	if err != nil {
		t.Fatalf("%s: compiled text %q does not re-tokenize: %v", st.Dialect, st.SQL, err)
	}
	used := make([]bool, len(st.Params)+1)
	var lits []string
	for _, tk := range toks {
		text := st.SQL[tk.start:tk.end]
		switch tk.kind {
		case tokParam:
			t.Fatalf("%s: named parameter %q left in %q", st.Dialect, text, st.SQL)
		case tokComment:
			t.Fatalf("%s: comment %q left in %q", st.Dialect, text, st.SQL)
		case tokNative:
			marker := "?"
			if st.Dialect == Postgres {
				marker = "$"
			}
			n, err := strconv.Atoi(strings.TrimPrefix(text, marker))
			if !strings.HasPrefix(text, marker) || err != nil || n < 1 || n > len(st.Params) {
				t.Fatalf("%s: stray placeholder %q in %q (%d params)", st.Dialect, text, st.SQL, len(st.Params))
			}
			used[n] = true
		case tokString, tokQuoted, tokDollar:
			lits = append(lits, text)
		}
	}
	for n := 1; n <= len(st.Params); n++ {
		if !used[n] {
			t.Fatalf("%s: placeholder %d of %d never appears in %q", st.Dialect, n, len(st.Params), st.SQL)
		}
	}
	params, refLits, ok := refScan(src, st.Dialect)
	if !ok {
		t.Fatalf("%s: reference scanner rejects %q, which compiled", st.Dialect, src)
	}
	if !slices.Equal(params, st.Params) {
		t.Fatalf("%s: Params %q, reference scanner found %q in %q", st.Dialect, st.Params, params, src)
	}
	if !slices.Equal(lits, refLits) {
		t.Fatalf("%s: literals changed:\n got  %q\n want %q", st.Dialect, lits, refLits)
	}
}

// checkBind verifies that the statement specialized for args binds them,
// unwrapping each One, and that the unspecialized one refuses a One.
func checkBind(t *testing.T, st, sp *Statement, args Args) {
	t.Helper()
	full := Args{}
	for _, p := range st.Params {
		full[p] = "y"
	}
	hasOne := false
	for p, v := range args {
		_, isOne := v.(oneValue)
		hasOne = hasOne || isOne
		full[p] = v
	}
	bound, err := sp.Bind(full)
	if err != nil {
		t.Fatalf("%s: the statement specialized for %v does not bind them: %v\n%s", st.Dialect, args, err, sp.SQL)
	}
	for i, v := range bound {
		if v != "x" && v != "y" {
			t.Fatalf("%s: Bind left %#v for %q", st.Dialect, v, sp.Params[i])
		}
	}
	if _, err := st.Bind(full); hasOne && err == nil {
		t.Fatalf("%s: the unspecialized statement binds One: %q", st.Dialect, st.SQL)
	}
}

// allFilters is an Args that activates every filter of st.
func allFilters(st *Statement) Args {
	args := Args{}
	for _, p := range st.filterParams(false) {
		args[p] = "x"
	}
	for _, p := range st.filterParams(true) {
		args[p] = One("x")
	}
	return args
}

// sameInBothDialects reports whether src avoids every construct the two
// dialects tokenize differently, so both must accept or reject it alike.
func sameInBothDialects(src string) bool {
	if strings.ContainsAny(src, "\\`[$?@#") || strings.Count(src, "/*") > 1 {
		return false
	}
	for i := 0; i+1 < len(src); i++ {
		if src[i] == ':' && isDigit(src[i+1]) {
			return false
		}
	}
	return true
}

// sameSkips reports whether both dialects find the same quoted and commented
// spans in src; where they do, they must find the same parameters.
func sameSkips(src string) bool {
	spans := func(d Dialect) []token {
		toks, err := lex(src, d)
		if err != nil {
			return nil
		}
		var out []token
		for _, t := range toks {
			switch t.kind {
			case tokString, tokQuoted, tokDollar, tokComment:
				out = append(out, t)
			}
		}
		return out
	}
	a, b := spans(SQLite), spans(Postgres)
	return a != nil && b != nil && slices.Equal(a, b)
}

// refScan is a second, independently structured reading of the tokenizer
// rules: a byte loop that tracks only whether it is inside a word. It returns
// the unique parameter names in first-use order and every literal, quoted
// identifier and dollar body in order. It does not judge driver placeholders
// or statement count; ok is false only for unterminated constructs.
func refScan(src string, d Dialect) (params, lits []string, ok bool) {
	pg := d == Postgres
	inWord := false
	for i := 0; i < len(src); {
		c, rest := src[i], src[i:]
		if inWord && isIdentCont(c) {
			i++
			continue
		}
		inWord = false
		switch {
		case strings.HasPrefix(rest, "--"):
			if j := strings.IndexByte(rest, '\n'); j >= 0 {
				i += j
			} else {
				i = len(src)
			}
		case strings.HasPrefix(rest, "/*"):
			depth, j := 0, 0
			for {
				if j+1 >= len(rest) {
					return nil, nil, false
				}
				if rest[j] == '/' && rest[j+1] == '*' && (pg || depth == 0) {
					depth, j = depth+1, j+2
				} else if rest[j] == '*' && rest[j+1] == '/' {
					depth, j = depth-1, j+2
					if depth == 0 {
						break
					}
				} else {
					j++
				}
			}
			i += j
		case pg && (c == 'E' || c == 'e') && len(rest) > 1 && rest[1] == '\'':
			j := 2
			for {
				if j >= len(rest) {
					return nil, nil, false
				}
				if rest[j] == '\\' {
					j += 2
					continue
				}
				if rest[j] == '\'' {
					if j+1 < len(rest) && rest[j+1] == '\'' {
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			lits, i = append(lits, rest[:j]), i+j
		case c == '\'' || c == '"' || (!pg && c == '`'):
			j := 1
			for {
				if j >= len(rest) {
					return nil, nil, false
				}
				if rest[j] == c {
					if j+1 < len(rest) && rest[j+1] == c {
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			lits, i = append(lits, rest[:j]), i+j
		case !pg && c == '[':
			j := strings.IndexByte(rest, ']')
			if j < 0 {
				return nil, nil, false
			}
			lits, i = append(lits, rest[:j+1]), i+j+1
		case pg && c == '$':
			j := 1
			for j < len(rest) && (isIdentStart(rest[j]) || (j > 1 && isDigit(rest[j]))) {
				j++
			}
			if j < len(rest) && rest[j] == '$' {
				delim := rest[:j+1]
				k := strings.Index(rest[len(delim):], delim)
				if k < 0 {
					return nil, nil, false
				}
				n := 2*len(delim) + k
				lits, i = append(lits, rest[:n]), i+n
			} else {
				i++
			}
		case strings.HasPrefix(rest, "::"):
			i += 2
		case c == ':' && len(rest) > 1 && isParamStart(rest[1]):
			j := 1
			for j < len(rest) && isParamCont(rest[j]) {
				j++
			}
			if name := rest[1:j]; !slices.Contains(params, name) {
				params = append(params, name)
			}
			i += j
		case isIdentStart(c) || isDigit(c):
			inWord = true
			i++
		default:
			i++
		}
	}
	return params, lits, true
}
