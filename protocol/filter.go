package protocol

import "strings"

// filter is one predicate Specialize may rewrite (the shapes are in the
// package doc): an optional filter, active when its argument is non-NULL,
// or a list filter, active when its argument is One.
//
// A list filter becomes col = :p with no parentheses, so that claim,
// specialized, is exactly the text a hand-written single-queue claim would
// be and plans as it would. Dropping them is only safe where no neighbour
// binds tighter than the comparison, hence a list filter counts only as a
// term of an AND/OR chain: after WHERE, AND, OR, NOT or '(' and before AND,
// OR, ')', ORDER, GROUP, LIMIT, RETURNING or the end.
type filter struct {
	param      string
	list       bool
	start, end int    // the filter's span in the root statement's compiled text
	repl       string // its equality form
}

// active reports whether argument v turns f into its equality form.
func (f *filter) active(v any) bool {
	if _, single := v.(oneValue); f.list || single {
		return f.list && single
	}
	return !isNull(v)
}

// findFilters returns the filters of a compiled statement in text order:
// code indexes toks' meaningful tokens, out is the compiled text, outAt
// where each token landed in it, and index each parameter's number.
func findFilters(src string, toks []token, code []int, out string, outAt []span, index map[string]int, d Dialect) []filter {
	uses := make(map[string]int) // each parameter's occurrences
	for _, i := range code {
		if t := toks[i]; t.kind == tokParam {
			uses[src[t.start+1:t.end]]++
		}
	}
	var found []filter
	listUses := make(map[string]int) // occurrences inside list filters
	for k := 0; k < len(code); k++ {
		c, list, ok := matchShape(src, toks, code, k, d)
		if !ok {
			continue
		}
		from, to := outAt[code[k]].start, outAt[code[c.pos-1]].end
		col := out[outAt[code[c.colFrom]].start:outAt[code[c.colTo]].end]
		eq := col + " = " + placeholder(d, index[c.param])
		if !list {
			eq = "(" + eq + ")"
		} else {
			listUses[c.param] += c.uses
			if to < len(out) && isIdentCont(out[to]) {
				eq += " " // the filter's ')' kept the placeholder off a word
			}
		}
		found = append(found, filter{param: c.param, list: list, start: from, end: to, repl: eq})
		k = c.pos - 1
	}
	filters := found[:0]
	for _, f := range found {
		if !f.list || listUses[f.param] == uses[f.param] {
			filters = append(filters, f)
		}
	}
	return filters
}

// matchShape matches a filter at code[k]: an optional filter anywhere, a
// list filter only as a term of an AND/OR chain. The cursor it returns
// stands just past the match.
func matchShape(src string, toks []token, code []int, k int, d Dialect) (c *cursor, list, ok bool) {
	at := func(pos int) *cursor { return &cursor{src: src, toks: toks, code: code, pos: pos} }
	if c := at(k); c.optional(d) {
		return c, false, true
	}
	if !at(k - 1).termStart() {
		return nil, false, false
	}
	for _, shape := range []func(*cursor, Dialect) bool{(*cursor).optionalList, (*cursor).plainList} {
		if c := at(k); shape(c, d) && c.termEnd() {
			return c, true, true
		}
	}
	return nil, false, false
}

// cursor walks meaningful tokens while a shape is matched, recording the
// filter's parameter, how often it occurs, and its column's token range.
type cursor struct {
	src            string
	toks           []token
	code           []int
	pos            int // next index into code
	param          string
	uses           int
	colFrom, colTo int // indices into code
}

func (c *cursor) next() (token, bool) {
	if c.pos < 0 || c.pos >= len(c.code) {
		c.pos++
		return token{}, false
	}
	t := c.toks[c.code[c.pos]]
	c.pos++
	return t, true
}

func (c *cursor) punct(b byte) bool {
	t, ok := c.next()
	return ok && t.kind == tokPunct && c.src[t.start] == b
}

// words matches each of ws in turn, in any case.
func (c *cursor) words(ws ...string) bool {
	for _, w := range ws {
		t, ok := c.next()
		if !ok || t.kind != tokWord || !strings.EqualFold(c.src[t.start:t.end], w) {
			return false
		}
	}
	return true
}

// sameParam matches the filter's parameter: the first one seen, then the
// same name again.
func (c *cursor) sameParam() bool {
	t, ok := c.next()
	if !ok || t.kind != tokParam {
		return false
	}
	p := c.src[t.start+1 : t.end]
	if c.param == "" {
		c.param = p
	} else if p != c.param {
		return false
	}
	c.uses++
	return true
}

// arg matches the parameter as the dialect writes a value of it: on
// Postgres cast to text, or to text[] for a list.
func (c *cursor) arg(d Dialect, list bool) bool {
	if !c.sameParam() {
		return false
	}
	if d != Postgres {
		return true
	}
	if t, ok := c.next(); !ok || t.kind != tokCast || !c.words("text") {
		return false
	}
	return !list || c.punct('[') && c.punct(']')
}

// column matches col, alias.col or a quoted name.
func (c *cursor) column() bool {
	c.colFrom = c.pos
	name := func() bool {
		t, ok := c.next()
		return ok && (t.kind == tokWord || t.kind == tokQuoted)
	}
	if !name() {
		return false
	}
	c.colTo = c.pos - 1
	if c.pos < len(c.code) {
		if t := c.toks[c.code[c.pos]]; t.kind == tokPunct && c.src[t.start] == '.' {
			c.pos++
			if !name() {
				return false
			}
			c.colTo = c.pos - 1
		}
	}
	return true
}

// optional matches (:p IS NULL OR col = :p), on Postgres (:p::text ...).
func (c *cursor) optional(d Dialect) bool {
	return c.punct('(') && c.arg(d, false) && c.words("is", "null", "or") &&
		c.column() && c.punct('=') && c.sameParam() && c.punct(')')
}

// optionalList matches (:p IS NULL OR col <member of :p>).
func (c *cursor) optionalList(d Dialect) bool {
	return c.punct('(') && c.arg(d, true) && c.words("is", "null", "or") &&
		c.column() && c.member(d) && c.punct(')')
}

// plainList matches col <member of :p>.
func (c *cursor) plainList(d Dialect) bool { return c.column() && c.member(d) }

// member matches the membership test of a list parameter: on Postgres
// = ANY (:p::text[]), on SQLite IN (SELECT value FROM json_each(:p)).
func (c *cursor) member(d Dialect) bool {
	if d == Postgres {
		return c.punct('=') && c.words("any") && c.punct('(') && c.arg(d, true) && c.punct(')')
	}
	return c.words("in") && c.punct('(') && c.words("select", "value", "from", "json_each") &&
		c.punct('(') && c.arg(d, true) && c.punct(')') && c.punct(')')
}

// termStart reports whether the token at the cursor may precede a term of
// an AND/OR chain.
func (c *cursor) termStart() bool {
	t, ok := c.next()
	if !ok {
		return false
	}
	if t.kind == tokPunct {
		return c.src[t.start] == '('
	}
	return t.kind == tokWord && isAnyWord(c.src[t.start:t.end], "where", "and", "or", "not")
}

// termEnd reports whether a term of an AND/OR chain may end at the cursor.
func (c *cursor) termEnd() bool {
	probe := *c
	t, ok := probe.next()
	if !ok {
		return true
	}
	if t.kind == tokPunct {
		return c.src[t.start] == ')'
	}
	return t.kind == tokWord && isAnyWord(c.src[t.start:t.end], "and", "or", "order", "group", "limit", "returning")
}

func isAnyWord(w string, ws ...string) bool {
	for _, x := range ws {
		if strings.EqualFold(w, x) {
			return true
		}
	}
	return false
}
