package console

import (
	"context"
	"io/fs"
	"net/http"
)

// CountOnce runs the overview's background count once, as its goroutine
// does, for the benchmarks.
func CountOnce(h http.Handler) error {
	_, err := h.(*handler).k.count(context.Background())
	return err
}

// StaticFiles serves fsys as the console serves its static files, and
// returns the path (under the console's root) a page names each file by.
func StaticFiles(fsys fs.FS) (http.Handler, func(name string) string, error) {
	s, err := newStatic(fsys)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/{name}", s)
	return mux, s.url, nil
}
