// Package quietlog holds cairnq's default logger, the one every package of
// the module falls back to when it is given no *slog.Logger: records at
// [Level] (WARN) and above, handed to the handler slog.Default() has when
// each record is logged. A healthy program therefore prints nothing of
// cairnq's, an application that installs its own default handler still
// receives cairnq's warnings and errors there, and INFO is one option away:
// a logger given (slog.Default() itself, say) is used as it is.
//
// The rule is stated to users once, in the cairnq package's documentation
// ("Logging"); this package is where it is kept.
package quietlog

import (
	"context"
	"log/slog"
)

// Level is the least level the default logger passes on.
const Level = slog.LevelWarn

// Or returns l, or the default logger when l is nil.
func Or(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return Default()
}

// Default returns the default logger: [Level] and above, through the
// handler of slog.Default() at the time of each record, so an application
// that calls slog.SetDefault after opening cairnq is followed.
func Default() *slog.Logger {
	return slog.New(handler{})
}

// handler passes records at Level and above to slog.Default()'s handler,
// with the attributes and groups it was derived with.
type handler struct {
	derive []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= Level && h.target().Enabled(ctx, l)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(func(t slog.Handler) slog.Handler { return t.WithAttrs(attrs) })
}

func (h handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(func(t slog.Handler) slog.Handler { return t.WithGroup(name) })
}

func (h handler) with(f func(slog.Handler) slog.Handler) handler {
	d := make([]func(slog.Handler) slog.Handler, len(h.derive), len(h.derive)+1)
	copy(d, h.derive)
	return handler{derive: append(d, f)}
}

// target is slog.Default()'s handler now, derived as h was.
func (h handler) target() slog.Handler {
	t := slog.Default().Handler()
	for _, f := range h.derive {
		t = f(t)
	}
	return t
}
