package quietlog_test

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/internal/quietlog"
)

// useDefault makes h slog.Default()'s handler for the test, restoring the
// default logger and the log package's output and flags after it.
func useDefault(t *testing.T, h slog.Handler) {
	old, w, flags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() {
		slog.SetDefault(old)
		log.SetOutput(w)
		log.SetFlags(flags)
	})
}

func TestDefaultPassesWarnToTheDefaultHandler(t *testing.T) {
	var buf bytes.Buffer
	useDefault(t, slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := quietlog.Default().With("component", "c").WithGroup("g")
	ctx := context.Background()
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		if l.Enabled(ctx, lv) {
			t.Errorf("enabled at %v", lv)
		}
	}
	l.Debug("debug line")
	l.Info("info line")
	l.Warn("warn line", "k", 1)
	l.Error("error line")
	out := buf.String()
	if strings.Contains(out, "debug line") || strings.Contains(out, "info line") {
		t.Errorf("below WARN got through:\n%s", out)
	}
	if !strings.Contains(out, `msg="warn line" component=c g.k=1`) || !strings.Contains(out, "error line") {
		t.Errorf("WARN and ERROR should reach the default handler with attrs and groups:\n%s", out)
	}
}

func TestDefaultFollowsSetDefault(t *testing.T) {
	l := quietlog.Default() // before the application installs its handler
	var buf bytes.Buffer
	useDefault(t, slog.NewTextHandler(&buf, nil))
	l.Warn("after set default")
	if !strings.Contains(buf.String(), "after set default") {
		t.Errorf("a logger made before slog.SetDefault should follow it; got %q", buf.String())
	}
}

func TestDefaultHonoursTheHandlersLevel(t *testing.T) {
	var buf bytes.Buffer
	useDefault(t, slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	quietlog.Default().Warn("warn line")
	if buf.Len() != 0 {
		t.Errorf("a handler at ERROR should not get WARN: %q", buf.String())
	}
}

func TestOrKeepsAGivenLogger(t *testing.T) {
	l := slog.New(slog.DiscardHandler)
	if quietlog.Or(l) != l {
		t.Error("Or replaced a given logger")
	}
	if quietlog.Or(nil) == nil {
		t.Error("Or(nil) is nil")
	}
}
