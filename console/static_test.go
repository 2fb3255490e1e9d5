package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// staticRef is a static file a page names: its name and the hash in it.
var staticRef = regexp.MustCompile(`(?:href|src)="/cairnq/static/([a-z]+)\.([0-9a-f]+)\.([a-z]+)"`)

// The pages name the static files by a hash of their bytes, served to be
// kept for good; the plain names still answer, asked about again on each
// use; a hash of other bytes answers 404.
func TestStaticFilesUnderHashedNames(t *testing.T) {
	c, err := cairnq.Open(ctx(t), t.TempDir()+"/c.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := mount(t, c, nil)
	page := get(t, h, "/cairnq/tasks")
	refs := staticRef.FindAllStringSubmatch(page.Body, -1)
	seen := map[string]bool{}
	for _, m := range refs {
		file, hash, ext := m[1]+"."+m[3], m[2], m[3]
		seen[file] = true
		r := get(t, h, "/cairnq/static/"+m[1]+"."+hash+"."+ext)
		sum := sha256.Sum256([]byte(r.Body))
		if r.Status != http.StatusOK || !strings.HasPrefix(hex.EncodeToString(sum[:]), hash) || len(hash) < 16 {
			t.Errorf("%s as %s: %d, the bytes served hash to %x", file, hash, r.Status, sum[:8])
		}
		if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s under its hashed name: Cache-Control %q", file, cc)
		}
		plain := get(t, h, "/cairnq/static/"+file)
		if plain.Status != http.StatusOK || plain.Body != r.Body || plain.Header.Get("Cache-Control") != "no-cache" ||
			plain.Header.Get("ETag") != `"`+hash+`"` {
			t.Errorf("%s under its plain name: %d, Cache-Control %q, ETag %q, same bytes %v", file, plain.Status,
				plain.Header.Get("Cache-Control"), plain.Header.Get("ETag"), plain.Body == r.Body)
		}
		again := do(t, h, "GET", "/cairnq/static/"+file, nil, map[string]string{"If-None-Match": `"` + hash + `"`})
		if again.Status != http.StatusNotModified {
			t.Errorf("%s revalidated with its ETag: %d, want 304", file, again.Status)
		}
		other := strings.Repeat("0", len(hash))
		if r := get(t, h, "/cairnq/static/"+m[1]+"."+other+"."+ext); r.Status != http.StatusNotFound {
			t.Errorf("%s under a hash of other bytes: %d, want 404", file, r.Status)
		}
	}
	for _, f := range []string{"console.css", "console.js", "favicon.svg"} {
		if !seen[f] {
			t.Errorf("the page names no hashed %s:\n%s", f, page.Body)
		}
	}
	if ct := get(t, h, "/cairnq/static/nope.js").Status; ct != http.StatusNotFound {
		t.Errorf("a file the console does not have: %d", ct)
	}
}

// A file's name follows its bytes: new bytes, a new name (so an upgrade
// reaches browsers that kept the old file), the same bytes, the same name.
func TestStaticNameFollowsContent(t *testing.T) {
	v1 := fstest.MapFS{"app.js": {Data: []byte("console.log(1)")}, "app.css": {Data: []byte("a{}")}}
	v2 := fstest.MapFS{"app.js": {Data: []byte("console.log(2)")}, "app.css": {Data: []byte("a{}")}}
	h1, url1, err := console.StaticFiles(v1)
	if err != nil {
		t.Fatal(err)
	}
	h2, url2, err := console.StaticFiles(v2)
	if err != nil {
		t.Fatal(err)
	}
	if url1("app.js") == url2("app.js") {
		t.Fatalf("app.js changed, its name did not: %s", url1("app.js"))
	}
	if url1("app.css") != url2("app.css") {
		t.Fatalf("app.css is the same, its name changed: %s, %s", url1("app.css"), url2("app.css"))
	}
	for _, v := range []struct {
		h    http.Handler
		url  string
		body string
	}{{h1, url1("app.js"), "console.log(1)"}, {h2, url2("app.js"), "console.log(2)"}} {
		r := get(t, v.h, v.url)
		if r.Status != http.StatusOK || r.Body != v.body || r.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("%s: %d %q, Cache-Control %q", v.url, r.Status, r.Body, r.Header.Get("Cache-Control"))
		}
	}
	// The old name, asked of the new version (a browser with an old page):
	// not the new bytes under a name that promises the old ones.
	if r := get(t, h2, url1("app.js")); r.Status != http.StatusNotFound {
		t.Errorf("the old name of app.js after the change: %d %q, want 404", r.Status, r.Body)
	}
}
