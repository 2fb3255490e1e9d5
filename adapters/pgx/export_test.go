package cairnqpgx

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SetListenHealth shortens the idle check and ping timeout of e's future
// listeners, so tests can exercise the health check quickly.
func SetListenHealth(e *Executor, idle, ping time.Duration) {
	e.idleCheck, e.pingTimeout = idle, ping
}

// PoolConfig is the configuration [Open] would give its pool, without
// connecting.
func PoolConfig(dsn string, opts *Options) (*pgxpool.Config, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	return poolConfig(dsn, &o)
}
