package console

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// The console's stylesheet, script and icon are served under names that
// carry a hash of their bytes (console.css as console.3f09a1c27b4de8a5.css),
// and pages name them so. A name with a hash never changes what it serves,
// so a browser may keep it for a year without asking again; an upgrade that
// changes a file changes its name, and the next page loads the new one.

// staticHashLen is how many hex digits of the content's SHA-256 a name
// carries: 64 bits, far past any chance of two versions of one file
// sharing a name.
const staticHashLen = 16

// Cache-Control of the static files.
const (
	// cacheImmutable: a hashed name, whose bytes never change.
	cacheImmutable = "public, max-age=31536000, immutable"
	// cacheRevalidate: a plain name (console.js), still served for links
	// made before names had hashes: kept, but asked about again (its ETag
	// is the hash) on each use.
	cacheRevalidate = "no-cache"
)

// staticFiles serves a directory of files under hashed names, and under
// their plain names with revalidation.
type staticFiles struct {
	files  http.Handler
	hashed map[string]string // plain name -> hashed name
	plain  map[string]string // hashed name -> plain name
	etag   map[string]string // plain name -> its quoted ETag
}

// newStatic hashes every file of fsys (a flat directory).
func newStatic(fsys fs.FS) (*staticFiles, error) {
	s := &staticFiles{files: http.FileServerFS(fsys), hashed: map[string]string{}, plain: map[string]string{}, etag: map[string]string{}}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])[:staticHashLen]
		name := hashedName(e.Name(), h)
		s.hashed[e.Name()], s.plain[name], s.etag[e.Name()] = name, e.Name(), `"`+h+`"`
	}
	return s, nil
}

// hashedName puts h before the name's extension: console.js, h ->
// console.h.js.
func hashedName(name, h string) string {
	ext := path.Ext(name)
	return strings.TrimSuffix(name, ext) + "." + h + ext
}

// url is the path of the file named plain under the console's root, with
// its hash; a name that is not a file of the console is returned as it is
// (and answers 404).
func (s *staticFiles) url(plain string) string {
	if h, ok := s.hashed[plain]; ok {
		return "/static/" + h
	}
	return "/static/" + plain
}

// ServeHTTP serves /static/{name}: a hashed name of a file now (immutable),
// or a plain one (revalidated). A hashed name of another version of a file
// answers 404: it must not be kept as an immutable copy of other bytes.
func (s *staticFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	plain, ok := s.plain[name]
	cache := cacheImmutable
	if !ok {
		if _, isFile := s.hashed[name]; !isFile {
			http.NotFound(w, r)
			return
		}
		plain, cache = name, cacheRevalidate
		w.Header().Set("ETag", s.etag[name]) // FileServer answers If-None-Match with it
	}
	w.Header().Set("Cache-Control", cache)
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + plain
	r2.URL.RawPath = ""
	s.files.ServeHTTP(w, r2)
}
