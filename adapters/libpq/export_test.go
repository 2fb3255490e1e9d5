package cairnqlibpq

import (
	"context"
	"database/sql"
	"time"

	"github.com/lib/pq"

	"github.com/cairnq/cairnq-go/internal/pglisten"
)

// SetListenHealth shortens the idle check and ping timeout of e's future
// listeners, so tests can exercise the health check quickly.
func SetListenHealth(e *Executor, idle, ping time.Duration) {
	e.listenCfg.IdleCheck, e.listenCfg.PingTimeout = idle, ping
}

// ListenSession runs one session of the listener's source on dsn, as
// pglisten's loop does for each connection it makes; its delivery check
// notifies from a connection to notifyDSN.
func ListenSession(ctx context.Context, dsn, notifyDSN string, l *pglisten.Listener, subscribed func()) (up bool, err error) {
	db, err := sql.Open("postgres", notifyDSN)
	if err != nil {
		return false, err
	}
	defer db.Close()
	notify := func(ctx context.Context, channel, payload string) error {
		_, err := db.ExecContext(ctx, pglisten.NotifySQL(channel, payload))
		return err
	}
	return pqSource{dsn: dsn, notify: notify}.Session(ctx, ctx, l, subscribed)
}

// OpenPool returns an executor on a pool made from dsn as Open makes one,
// without Open's first connection: every statement's connection is one
// the pool makes later, through the connector Open's pools have.
func OpenPool(dsn string) (*Executor, error) {
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = connectTimeout(0, cfg.ConnectTimeout)
	cfg.BinaryParameters = true
	connector, err := newConnector(cfg)
	if err != nil {
		return nil, err
	}
	e := newExecutor(sql.OpenDB(connector), dsn, withDefaults(nil), false, true)
	e.owned = true
	return e, nil
}
