#!/usr/bin/env bash
# A Docker engine for the container paths (the testcontainers fallback, `npm run rabbitmq4`) on a
# machine without systemd or registry: Debian's docker.io, started by hand on loopback only.
#
#   engine.sh start    install docker.io if missing (root), start dockerd unless one answers
#   engine.sh stop     stop the dockerd this script started (by its PID), nothing else
#   engine.sh status   say whether an engine answers
#
# The flags keep the host's firewall and forwarding alone, publish container ports on 127.0.0.1
# only and give containers no way out. With DOCKER_HOST=unix:///some/path the engine listens there
# instead of /var/run/docker.sock, so only processes given that DOCKER_HOST see it (CI does this:
# other tools on the machine that look for an engine at the default socket do not find one).
set -euo pipefail

STATE_DIR=${RM_CONTAINERS_STATE:-/var/cache/reliable-messaging}
PIDFILE=$STATE_DIR/dockerd.pid
LOG=$STATE_DIR/dockerd.log

answers() { docker info >/dev/null 2>&1; }

socket_args=()
case ${DOCKER_HOST:-} in
  '') ;;
  unix://*) socket_args=(-H "$DOCKER_HOST") ;;
  *) echo "Docker engine: DOCKER_HOST=$DOCKER_HOST is not a local socket: start that engine yourself" >&2; exit 1 ;;
esac

case "${1:-status}" in
  start)
    if answers; then echo "Docker engine: already answers"; exit 0; fi
    if ! command -v dockerd >/dev/null; then
      if [[ $(id -u) -ne 0 ]]; then echo "Docker engine: dockerd is not installed (apt-get install -y --no-install-recommends docker.io, as root)" >&2; exit 1; fi
      echo "Docker engine: installing Debian's docker.io"
      # --no-install-recommends: the recommends pull needrestart, which may restart running services
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null
    fi
    if [[ -s $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      echo "Docker engine: pid $(cat "$PIDFILE") runs but does not answer at ${DOCKER_HOST:-the default socket}" >&2
      exit 1
    fi
    mkdir -p "$STATE_DIR"
    # setsid: the engine outlives this shell and is not in its process group
    setsid dockerd --iptables=false --ip-forward=false --ip-masq=false --ip=127.0.0.1 \
      --pidfile "$PIDFILE" "${socket_args[@]}" >"$LOG" 2>&1 </dev/null &
    deadline=$((SECONDS + 30))
    until answers; do
      if ((SECONDS >= deadline)); then echo "Docker engine: did not answer within 30 s (see $LOG)" >&2; exit 1; fi
      sleep 0.2
    done
    echo "Docker engine: started (pid $(cat "$PIDFILE"), log $LOG)"
    ;;
  stop)
    if [[ ! -s $PIDFILE ]] || ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      echo "Docker engine: none started by this script"; exit 0
    fi
    pid=$(cat "$PIDFILE")
    kill -TERM "$pid"
    deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then echo "Docker engine: pid $pid still running after 30 s" >&2; exit 1; fi
      sleep 0.2
    done
    echo "Docker engine: stopped (pid $pid)"
    ;;
  status)
    if answers; then echo "Docker engine: answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"; else echo "Docker engine: does not answer"; exit 1; fi
    ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 64 ;;
esac
