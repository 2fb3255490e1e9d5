package engine

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// jsonbCorpus is JSON Postgres accepts, written to reach each rule of
// jsonbText: key order and duplicates, spacing, escapes, numbers.
var jsonbCorpus = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `-0.0`, `"x"`, `""`,
	`{"b":1,"a":2}`, `{"bb":1,"a":2,"c":3}`, `{"a":1,"a":2}`, `{"a":1,"b":0,"a":{"x":[]}}`,
	`{ "a" : [ 1 , 2 , { } , [ ] ] , "k" : null }`, "\t{\n\"a\"\r:1}\n",
	`[1.0, 1.50, -2.000, 0.001, 10, 123456789012345678901234567890.1234567890]`,
	`[1e2, 1E2, 1e+2, 1e-2, 1.5e1, 1.20e-1, 0e5, 0.0e-3, -1e-7, 1e21, 12.34e1, 12.34e2, 12.34e3, 5e-0]`,
	`["a\"b", "a\\b", "a\/b", "\b\f\n\r\t", "\u0001\u001f\u007f", "\u0041", "é", "日本語", "😀", "a/b"]`,
	`{"\u0061":1, "a":2}`, `{"é":1,"e":2,"ee":3}`, `{"":1}`, `[[[[[]]]]]`, `{"a":{"b":{"c":{}}}}`,
	`"<>&"`, `"\u003c\u003e\u0026"`, "\"\x7f\"", `{"payload":{"page":1,"urls":["a","b"]}}`,
}

// jsonbUncertain is JSON Postgres refuses or reads by the database's
// encoding, and input that is not JSON: jsonbText must leave them to the
// server.
var jsonbUncertain = []string{
	`"\u0000"`, `"\u00e9"`, `"\ud83d\ude00"`, `1e1000`, `01`, `1.`, `.5`, `+1`, `[1,]`, `{"a"}`,
	`{"a":1,}`, `nul`, `[1] x`, `"` + "\x01" + `"`, "\"\xff\"", `{"a":1`, `"\x"`, `"\u12"`,
	strings.Repeat("[", jsonbTextDepth+2) + strings.Repeat("]", jsonbTextDepth+2),
}

func TestJSONBTextLeavesUncertainInputToTheServer(t *testing.T) {
	for _, doc := range jsonbUncertain {
		if out, ok := jsonbText(doc); ok {
			t.Errorf("jsonbText(%q) = %q, true; want it left to the server", doc, out)
		}
	}
}

// TestJSONBTextMatchesPostgres holds jsonbText to the text a real
// server prints for the corpus and for thousands of generated documents.
func TestJSONBTextMatchesPostgres(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	docs := append([]string{}, jsonbCorpus...)
	r := rand.New(rand.NewPCG(49, 1))
	for range 5000 {
		docs = append(docs, randomJSON(r, 0))
	}
	rows, err := db.Query(`SELECT CAST(CAST(d AS jsonb) AS text) FROM unnest(CAST($1 AS text[])) WITH ORDINALITY AS u(d, n) ORDER BY n`, docs)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	printed := 0
	for i := 0; rows.Next(); i++ {
		var want string
		if err := rows.Scan(&want); err != nil {
			t.Fatal(err)
		}
		got, ok := jsonbText(docs[i])
		if !ok {
			continue
		}
		printed++
		if got != want {
			t.Errorf("jsonbText(%q)\n got %q\nwant %q (the server's)", docs[i], got, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Only non-ASCII \u escapes (Go's encoder writes U+2028 so, one of
	// the generator's runes) and deep nesting are left to the server.
	if printed < len(docs)*3/4 {
		t.Errorf("jsonbText printed %d of %d documents; most should not need the server", printed, len(docs))
	}
}

// randomJSON is a JSON document: Go's encoder's output for a random value
// mixed with hand-spaced text, numbers in every form JSON allows.
func randomJSON(r *rand.Rand, depth int) string {
	k := r.IntN(9)
	if depth > 4 {
		k = 4 + r.IntN(5)
	}
	sp := func() string { return []string{"", " ", "\n  ", "\t"}[r.IntN(4)] }
	switch k {
	case 0, 1:
		n := r.IntN(6)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = sp() + randomKey(r) + sp() + ":" + sp() + randomJSON(r, depth+1) + sp()
		}
		return "{" + strings.Join(parts, ",") + "}"
	case 2, 3:
		n := r.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = sp() + randomJSON(r, depth+1) + sp()
		}
		return "[" + strings.Join(parts, ",") + "]"
	case 4, 5:
		return randomNumber(r)
	case 6:
		return []string{"true", "false", "null"}[r.IntN(3)]
	default:
		b, _ := json.Marshal(randomString(r))
		return string(b)
	}
}

func randomKey(r *rand.Rand) string {
	b, _ := json.Marshal([]string{"a", "b", "ab", "ba", "aa", "z", "é", "", "key", "k\"y"}[r.IntN(10)])
	return string(b)
}

func randomString(r *rand.Rand) string {
	const alphabet = "ab \"\\/\b\f\n\r\t\x01\x1f\x7f<>&é日😀\u2028"
	runes := []rune(alphabet)
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

func randomNumber(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return fmt.Sprint(r.IntN(2000) - 1000)
	case 1:
		b, _ := json.Marshal(r.NormFloat64() * []float64{1e-9, 1e-3, 1, 1e6, 1e22}[r.IntN(5)])
		return string(b)
	default:
		sign := []string{"", "-"}[r.IntN(2)]
		whole := []string{"0", "1", "10", "907", "12345678901234567890"}[r.IntN(5)]
		frac := []string{"", ".0", ".5", ".050", ".00000", ".123456789"}[r.IntN(6)]
		exp := ""
		if r.IntN(2) == 0 {
			exp = fmt.Sprintf("%s%s%d", []string{"e", "E"}[r.IntN(2)], []string{"", "+", "-"}[r.IntN(3)], r.IntN(25))
		}
		return sign + whole + frac + exp
	}
}
