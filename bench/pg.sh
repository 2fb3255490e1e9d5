#!/usr/bin/env bash
# pg.sh: a throwaway local PostgreSQL cluster for the benchmarks.
#
#   bench/pg.sh [start]   init + start a cluster, print its DSN on stdout
#   bench/pg.sh dsn       print the DSN of the running cluster
#   bench/pg.sh stop      stop it and remove its data directory
#   bench/pg.sh status
#
# Typical use:
#   export BENCH_PG_DSN=$(bench/pg.sh)
#   (cd bench && go run ./cmd/pgbench-cairnq)
#   bench/pg.sh stop
#
# The cluster keeps the server's durability DEFAULTS (fsync on,
# synchronous_commit on, full_page_writes on) so the figures are honest; only
# max_connections (300, for 64+ workers and several pools) and shared_buffers
# (256MB) are raised. It listens on 127.0.0.1 on a free port, no Unix socket.
# postgres refuses to run as root, so as root the cluster runs as the
# unprivileged user cairnq-pg (created as a system user when missing).
#
# Environment: PG_BIN (default: newest /usr/lib/postgresql/*/bin, 15 here),
# BENCH_PG_DIR (default /tmp/cairnq-bench-pg), BENCH_PG_PORT (default: a
# free port), BENCH_PG_STATEMENTS=1 to preload pg_stat_statements (for
# pgbench-cairnq --statements; a small overhead on every statement, so
# leave it off for the figures you publish).
set -euo pipefail

DIR=${BENCH_PG_DIR:-/tmp/cairnq-bench-pg}
DATA=$DIR/data
LOG=$DIR/postgres.log
USER_NAME=cairnq-pg

pg_bin() {
	if [[ -n ${PG_BIN:-} ]]; then
		echo "$PG_BIN"
		return
	fi
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
	if [[ -z $d || ! -x $d/postgres ]]; then
		echo "pg.sh: no PostgreSQL binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql-15), or set PG_BIN" >&2
		exit 1
	fi
	echo "$d"
}

# as_pg runs a command as the cluster user (as ourselves when not root).
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u "$USER_NAME" -- env -i PATH=/usr/bin:/bin LC_ALL=C LANG=C HOME="$DIR" "$@"
	else
		"$@"
	fi
}

ensure_user() {
	[[ $(id -u) -eq 0 ]] || return 0
	id "$USER_NAME" >/dev/null 2>&1 && return 0
	useradd --system --no-create-home --user-group --home-dir /nonexistent \
		--shell /usr/sbin/nologin "$USER_NAME"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 30000))
		if port_free "$p"; then
			echo "$p"
			return
		fi
	done
	echo "pg.sh: no free port found" >&2
	exit 1
}

dsn() {
	[[ -f $DIR/port ]] || { echo "pg.sh: no cluster in $DIR (run pg.sh start)" >&2; exit 1; }
	echo "postgres://postgres@127.0.0.1:$(cat "$DIR/port")/postgres?sslmode=disable"
}

running() { [[ -f $DATA/postmaster.pid ]] && kill -0 "$(head -1 "$DATA/postmaster.pid")" 2>/dev/null; }

start() {
	if running; then
		echo "pg.sh: already running in $DIR" >&2
		dsn
		return
	fi
	local bin
	bin=$(pg_bin)
	ensure_user
	rm -rf "$DIR"
	mkdir -p "$DIR"
	[[ $(id -u) -eq 0 ]] && chown "$USER_NAME:" "$DIR"
	as_pg "$bin/initdb" --pgdata="$DATA" --username=postgres --auth=trust \
		--encoding=UTF8 --locale=C >"$DIR/initdb.log" 2>&1 ||
		{ cat "$DIR/initdb.log" >&2; exit 1; }
	cat >>"$DATA/postgresql.conf" <<-'EOF'

		# Added by cairnq bench/pg.sh. Durability settings are left at the
		# server defaults (fsync, synchronous_commit, full_page_writes on).
		listen_addresses = '127.0.0.1'
		unix_socket_directories = ''
		max_connections = 300
		shared_buffers = 256MB
		logging_collector = off
	EOF
	if [[ ${BENCH_PG_STATEMENTS:-} == 1 ]]; then
		echo "shared_preload_libraries = 'pg_stat_statements'" >>"$DATA/postgresql.conf"
	fi
	local port attempt
	for attempt in 1 2 3; do
		port=${BENCH_PG_PORT:-$(pick_port)}
		if as_pg "$bin/pg_ctl" -D "$DATA" -l "$LOG" -o "-p $port" -w -t 60 start >/dev/null 2>&1; then
			echo "$port" >"$DIR/port"
			dsn
			return
		fi
		if ! grep -q "could not bind" "$LOG" 2>/dev/null || [[ -n ${BENCH_PG_PORT:-} ]]; then
			break
		fi
	done
	echo "pg.sh: postgres did not start; tail of $LOG:" >&2
	tail -30 "$LOG" >&2 || true
	exit 1
}

stop() {
	if running; then
		as_pg "$(pg_bin)/pg_ctl" -D "$DATA" -m fast -w -t 30 stop >/dev/null
	fi
	rm -rf "$DIR"
}

case ${1:-start} in
start) start ;;
stop) stop ;;
dsn) dsn ;;
status) if running; then echo "running: $(dsn)"; else echo "not running"; exit 1; fi ;;
*) echo "usage: $0 [start|stop|dsn|status]" >&2; exit 2 ;;
esac
