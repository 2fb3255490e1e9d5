#!/usr/bin/env bash
# Builds the local PostgreSQL 15 image the tests' Docker path can use where
# no image registry is reachable, and makes sure a Docker engine answers.
#
#   docker/postgres/build.sh [IMAGE]     (default cairnq-postgres:15-local)
#
# Run as root: it installs docker.io and debootstrap when they are missing,
# starts dockerd when no engine answers (honouring DOCKER_HOST when it names
# a unix socket; the pid goes to $TMPDIR/cairnq-dockerd.pid, so a caller can
# stop what it started), and builds the image only when it does not exist
# yet. The root filesystem is Debian's own, fetched by debootstrap from the
# mirror apt is configured with on this machine; nothing here names a
# package host. Then run the tests as .ci/run does:
#
#   CAIRNQ_PG_IMAGE=IMAGE TESTCONTAINERS_HOST_OVERRIDE=localhost ./scripts/test
#
# (the engine runs on this host, so its published ports are on localhost;
# testcontainers would otherwise guess a gateway when it finds /.dockerenv).
set -euo pipefail

image=${1:-cairnq-postgres:15-local}
here=$(cd "$(dirname "$0")" && pwd)

say() { echo "docker/postgres: $*" >&2; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
	args=()
	case "${DOCKER_HOST:-}" in
	unix://*) args+=(--host "$DOCKER_HOST" --pidfile "${DOCKER_HOST#unix://}.pid") ;;
	"") ;;
	*) say "DOCKER_HOST=$DOCKER_HOST does not answer and is not a local socket"; exit 1 ;;
	esac
	log=${TMPDIR:-/tmp}/cairnq-dockerd.log
	say "starting dockerd (log: $log)"
	nohup dockerd "${args[@]}" >"$log" 2>&1 &
	echo $! >"${TMPDIR:-/tmp}/cairnq-dockerd.pid"
	for _ in $(seq 1 120); do
		docker info >/dev/null 2>&1 && break
		sleep 0.5
	done
	if ! docker info >/dev/null 2>&1; then
		say "dockerd did not answer within 60s:"
		tail -20 "$log" >&2
		exit 1
	fi
fi

if docker image inspect "$image" >/dev/null 2>&1; then
	say "$image exists"
	exit 0
fi

. /etc/os-release
suite=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
# apt's own view of where it fetches the main component from.
mirror=$(apt-cache policy | awk -v s="$suite/main" '$3 == s && $2 ~ /^https?:/ {print $2; exit}')
if [ -z "$mirror" ]; then
	say "no $suite/main source in apt's configuration"
	exit 1
fi

rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
say "debootstrap $suite with postgresql-15 from apt's mirror"
debootstrap --variant=minbase --include=postgresql-15 "$suite" "$rootfs" "$mirror" >/dev/null
install -m 0755 "$here/entrypoint.sh" "$rootfs/usr/local/bin/docker-entrypoint.sh"
# The package's own cluster and the download caches are not needed.
rm -rf "$rootfs"/var/lib/postgresql/15 "$rootfs"/etc/postgresql/15 \
	"$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

say "importing $image"
tar -C "$rootfs" -c . | docker import \
	--change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
	--change 'CMD ["postgres"]' \
	--change 'ENV PGDATA=/var/lib/postgresql/data' \
	--change 'EXPOSE 5432' \
	- "$image" >/dev/null
say "built $image"
