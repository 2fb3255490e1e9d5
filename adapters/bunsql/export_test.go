package cairnqbunsql

import "time"

// SetListenHealth shortens the idle check and ping timeout of e's future
// listeners, so tests can exercise the health check quickly.
func SetListenHealth(e *Executor, idle, ping time.Duration) {
	e.listenCfg.IdleCheck, e.listenCfg.PingTimeout = idle, ping
}
