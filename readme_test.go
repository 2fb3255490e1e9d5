package cairnq_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeMaxLines is how long the README may grow: it is a tour, and the
// reference is in the package documentation. (Raised from 350 for the
// Workflows and Global limits sections, issue 31, then to 500, the bound
// the project keeps, for Durable steps, issue 48.)
const readmeMaxLines = 500

// readmeMarker names, on the line just above a ```go block, the file
// (relative to the repository's root) and the Example function whose body
// the block is.
var readmeMarker = regexp.MustCompile(`^<!-- readme: (\S+\.go) (Example\w*) -->$`)

// The README stays short, every Go block in it is the body of an Example
// that go test compiles and runs, and its links lead somewhere.
func TestReadme(t *testing.T) {
	readme := readFile(t, "README.md")
	if n := strings.Count(readme, "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move reference material to the package docs", n, readmeMaxLines)
	}
	blocks, problems := readmeGoBlocks(readme)
	for _, p := range problems {
		t.Error(p)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block: the Quick start at least must be one")
	}
	for _, b := range blocks {
		checkReadmeBlock(t, b)
	}
	for _, doc := range []string{"README.md", "CONTRIBUTING.md"} {
		checkLinks(t, doc, readFile(t, doc))
	}
}

// readmeBlock is a ```go block of the README and the marker above it.
type readmeBlock struct {
	line       int    // of the opening fence, 1-based
	marker     string // the line above the fence
	code       string // between the fences
	file, name string // from the marker; empty if it did not match
}

// readmeGoBlocks returns the README's ```go blocks, and what is wrong: a
// readme marker not followed by a ```go block (it would check nothing), a
// block that never ends.
func readmeGoBlocks(readme string) (blocks []readmeBlock, problems []string) {
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		if readmeMarker.MatchString(lines[i]) && (i+1 >= len(lines) || lines[i+1] != "```go") {
			problems = append(problems, fmt.Sprintf("README.md:%d: a readme marker not followed by a ```go block", i+1))
		}
		if lines[i] != "```go" {
			continue
		}
		b := readmeBlock{line: i + 1}
		if i > 0 {
			b.marker = lines[i-1]
		}
		if m := readmeMarker.FindStringSubmatch(b.marker); m != nil {
			b.file, b.name = m[1], m[2]
		}
		j := i + 1
		for j < len(lines) && lines[j] != "```" {
			j++
		}
		if j == len(lines) {
			problems = append(problems, fmt.Sprintf("README.md:%d: a ```go block that never ends", b.line))
			break
		}
		b.code = strings.Join(lines[i+1:j], "\n")
		blocks = append(blocks, b)
		i = j
	}
	return blocks, problems
}

// checkReadmeBlock requires b to be, up to indentation, the body of the
// Example its marker names, and that Example to run under go test.
func checkReadmeBlock(t *testing.T, b readmeBlock) {
	t.Helper()
	if b.file == "" {
		t.Errorf("README.md:%d: a ```go block without a marker line above it such as "+
			"<!-- readme: example_readme_test.go Example_quickStart --> (found %q)", b.line, b.marker)
		return
	}
	src := readFile(t, filepath.FromSlash(b.file))
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, b.file, src, parser.ParseComments)
	if err != nil {
		t.Errorf("README.md:%d: %v", b.line, err)
		return
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Recv == nil && d.Name.Name == b.name {
			fn = d
		}
	}
	if fn == nil {
		t.Errorf("README.md:%d: %s has no func %s", b.line, b.file, b.name)
		return
	}
	body := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
	code, hasOutput := exampleCode(body)
	if want, got := normalizeCode(code), normalizeCode(b.code); got != want {
		t.Errorf("README.md:%d: the block differs from the body of %s in %s; paste the body in.\n%s",
			b.line, b.name, b.file, firstDifference(got, want))
	}
	// An Example without an Output comment is compiled, never run; one of
	// those must be run by a test of its own file (as the Postgres ones in
	// examples/ are).
	if !hasOutput && strings.Count(src, b.name) < 2 {
		t.Errorf("README.md:%d: %s in %s has no Output comment and no test of that file calls it, so nothing runs it",
			b.line, b.name, b.file)
	}
}

// outputComment starts the comment go test compares an Example's output
// with.
var outputComment = regexp.MustCompile(`(?m)^\s*// (Unordered output|Output):`)

// exampleCode is an Example's body without its Output comment, as godoc
// shows it, and whether it had one.
func exampleCode(body string) (string, bool) {
	loc := outputComment.FindStringIndex(body)
	if loc == nil {
		return body, false
	}
	return body[:loc[0]], true
}

// normalizeCode removes the indentation every line shares, trailing white
// space, and blank lines at either end, so a body nested in a func
// compares equal to the same code at the left margin.
func normalizeCode(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	prefix := ""
	for i, l := range lines {
		if l == "" {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if i == 0 || !strings.HasPrefix(indent, prefix) {
			prefix = commonPrefix(prefix, indent, i == 0)
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "\n")
}

// commonPrefix is the longest prefix of a and b; with first, b itself.
func commonPrefix(a, b string, first bool) string {
	if first {
		return b
	}
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d of the block:\n  README:  %s\n  Example: %s",
				i+1, quoteLine(gl, i < len(g)), quoteLine(wl, i < len(w)))
		}
	}
	return ""
}

// quoteLine shows a line of a block, or that there was none.
func quoteLine(l string, present bool) string {
	if !present {
		return "(no such line)"
	}
	return "`" + l + "`"
}

// markdownLink finds a link's target: [text](target) and ![alt](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkLinks requires every relative link of the Markdown file name to
// resolve to a file or directory of the repository.
func checkLinks(t *testing.T, name, text string) {
	t.Helper()
	for _, m := range markdownLink.FindAllStringSubmatch(proseOf(text), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
			continue
		}
		target, _, _ = strings.Cut(target, "#")
		path := filepath.Join(filepath.Dir(name), filepath.FromSlash(target))
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s links to %s, which does not exist", name, m[1])
		}
	}
}

// inlineCode is a code span of Markdown, which holds no link.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// proseOf is the Markdown text without its fenced blocks and code spans,
// where a "](" is code, not a link.
func proseOf(text string) string {
	var prose []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose = append(prose, inlineCode.ReplaceAllString(l, ""))
		}
	}
	return strings.Join(prose, "\n")
}

// readFile returns the file at path, relative to the repository's root
// (the root package's directory, where go test runs its tests).
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README check compares what it should and refuses what it should.
func TestReadmeChecker(t *testing.T) {
	body := "\n\tctx := context.Background()\n\tif ok {\n\t\tf()\n\t}\n\t// Output: x\n"
	code, ok := exampleCode(body)
	if !ok {
		t.Fatal("exampleCode found no Output comment")
	}
	if got, want := normalizeCode(code), "ctx := context.Background()\nif ok {\n\tf()\n}"; got != want {
		t.Errorf("normalizeCode = %q, want %q", got, want)
	}
	if got := normalizeCode("  a\n    b  \n\n"); got != "a\n  b" {
		t.Errorf("normalizeCode with spaces = %q", got)
	}
	if _, ok := exampleCode("\tf()\n"); ok {
		t.Error("exampleCode found an Output comment in a body without one")
	}
	readme := "x\n<!-- readme: a.go Example_a -->\n```go\nf()\n```\n```go\ng()\n```\n<!-- readme: b.go Example_b -->\ntext\n"
	blocks, problems := readmeGoBlocks(readme)
	if len(blocks) != 2 || blocks[0].name != "Example_a" || blocks[0].code != "f()" || blocks[1].file != "" {
		t.Errorf("readmeGoBlocks = %+v", blocks)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "README.md:9:") {
		t.Errorf("a marker followed by no ```go block: problems %q, want one at line 9", problems)
	}
	prose := proseOf("see [a](a.md) and `x[i](j)`\n```go\nf := m[k](v)\n```\n![s](s.png)")
	if got := markdownLink.FindAllString(prose, -1); len(got) != 2 || got[0] != "](a.md)" || got[1] != "](s.png)" {
		t.Errorf("links found in prose: %q, want a.md and s.png only", got)
	}
	if _, problems := readmeGoBlocks("```go\nf()\n"); len(problems) != 1 {
		t.Errorf("a block that never ends: problems %q", problems)
	}
}
