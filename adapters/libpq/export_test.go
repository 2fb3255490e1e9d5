package cairnqlibpq

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/internal/pglisten"
)

// SetListenHealth shortens the idle check and ping timeout of e's future
// listeners, so tests can exercise the health check quickly.
func SetListenHealth(e *Executor, idle, ping time.Duration) {
	e.listenCfg.IdleCheck, e.listenCfg.PingTimeout = idle, ping
}

// ListenSession runs one session of the listener's source on dsn, as
// pglisten's loop does for each connection it makes.
func ListenSession(ctx context.Context, dsn string, l *pglisten.Listener, subscribed func()) (up bool, err error) {
	return pqSource{dsn: dsn}.Session(ctx, ctx, l, subscribed)
}
