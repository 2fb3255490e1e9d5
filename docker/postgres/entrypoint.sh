#!/bin/sh
# Entrypoint of the local PostgreSQL image (see build.sh). It keeps the
# contract of the official postgres image that testcontainers' postgres
# module relies on:
#   - POSTGRES_USER (default postgres), POSTGRES_PASSWORD (required) and
#     POSTGRES_DB (default: the user) make the superuser and database on the
#     first start of an empty data directory;
#   - the command is `postgres` followed by server arguments (`-c name=value`);
#   - "database system is ready to accept connections" is logged twice on a
#     first start: once by the private server that runs the setup, once by
#     the real one. The module's wait strategy counts two.
set -eu

bin=/usr/lib/postgresql/15/bin
PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PGDATA

if [ "${1:-postgres}" != postgres ]; then
	exec "$@" # anything else (a shell, psql) runs as given
fi
[ $# -gt 0 ] && shift

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
	echo "entrypoint: POSTGRES_PASSWORD must be set" >&2
	exit 1
fi

mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"

as_postgres() { runuser -u postgres -- "$@"; }

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	chown postgres "$pwfile"
	as_postgres "$bin/initdb" -D "$PGDATA" -U "$user" --pwfile="$pwfile" \
		--auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	# The setup server listens on the socket only, so nothing outside sees
	# the database before its user and database exist.
	as_postgres "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start
	if [ "$db" != postgres ]; then
		as_postgres "$bin/psql" -v ON_ERROR_STOP=1 -U "$user" -d postgres -q \
			-c "CREATE DATABASE \"$db\""
	fi
	as_postgres "$bin/pg_ctl" -D "$PGDATA" -m fast -w stop
fi

exec runuser -u postgres -- "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' "$@"
