package adaptertest

import (
	"database/sql"
	"testing"
)

// Notify sends a notification through the application's pool, not the
// executor under test, so a test sees what the executor receives from
// another session.
func Notify(t testing.TB, db *sql.DB, channel, payload string) {
	t.Helper()
	if _, err := db.ExecContext(Ctx(t), `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		t.Fatal(err)
	}
}

// ListenerPIDs lists the backends LISTENing in the test's database, in pid
// order. A backend whose last statement was pgx's idle-check ping counts
// too: pg_stat_activity shows only the last statement.
func ListenerPIDs(t testing.TB, db *sql.DB) []int64 {
	t.Helper()
	rows, err := db.QueryContext(Ctx(t), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND (query ILIKE 'listen%' OR query = '-- ping') ORDER BY pid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int64
	for rows.Next() {
		var pid int64
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// OneListener waits until exactly one backend other than not LISTENs and
// returns it: after a reconnect the old backend may linger in
// pg_stat_activity for a moment, and the new one may not have subscribed
// yet.
func OneListener(t testing.TB, db *sql.DB, not int64) int64 {
	t.Helper()
	var pid int64
	Poll(t, "one listener backend", func() bool {
		pids := ListenerPIDs(t, db)
		if len(pids) == 1 && pids[0] != not {
			pid = pids[0]
			return true
		}
		return false
	})
	return pid
}

// AwaitPing waits until backend pid's last statement is pgx's ping, the
// trace an idle check leaves when the listener pings on its own LISTEN
// connection.
func AwaitPing(t testing.TB, db *sql.DB, pid int64) {
	t.Helper()
	Poll(t, "an idle check ping", func() bool {
		var q string
		err := db.QueryRowContext(Ctx(t), `SELECT query FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&q)
		return err == nil && q == "-- ping"
	})
}
