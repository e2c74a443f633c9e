#!/usr/bin/env bash
# Run one long command across several device calls without cutting it at a call's end
# (examples/h200-qwen/README.md, "The tune on an H100": each cut cost a server start):
#   FOLLOW_UNTIL=EPOCH_S tools/device/follow.sh NAME -- COMMAND [ARGS...]
# The first call starts COMMAND in the background in a session of its own (setsid: it outlives the call, as
# tools/device/prepare.sh's steps do), its output in /tmp/follow-NAME.log; every call, that one included,
# follows it until it ends or until FOLLOW_UNTIL (epoch seconds), whichever comes first. A later call with the
# same NAME follows the running command and starts nothing (its COMMAND is not read). The machine's idle
# release ends the command with the machine, so the calls go back to back.
#   STOP=1 ...                  at FOLLOW_UNTIL, stop it instead of leaving it running: FOLLOW_STOP_FILE (if
#                               set) is touched first and given STOP_GRACE_S (30; worthit's measurements
#                               leave within seconds on it: worthit.stages.stop_on_request), then its session
#                               gets SIGTERM, and SIGKILL after STOP_GRACE_S more
# Prints this call's part of the log (FOLLOW_TAIL lines, 80; FOLLOW_DROP: an extended regex of lines left
# out) and exits 0 once the command ended (its exit status in /tmp/follow-NAME.rc), 3 while it still runs.
set -uo pipefail
name=$1; shift
[ "${1:-}" = "--" ] && shift
log=/tmp/follow-$name.log pidfile=/tmp/follow-$name.pid rcfile=/tmp/follow-$name.rc
until_s=${FOLLOW_UNTIL:?FOLLOW_UNTIL: epoch seconds at which this call stops following}
t0=$(date +%s); el() { echo "[follow $name +$(( $(date +%s) - t0 ))s] $*"; }
running() { [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
touch "$log"
from=$(stat -c %s "$log")
if running; then
  el "following the run an earlier call started (pid $(cat "$pidfile"))"
elif [ -f "$rcfile" ]; then
  el "ended before this call, exit $(cat "$rcfile")"
else
  rm -f "$pidfile"
  # shellcheck disable=SC2016  # expanded by the inner bash
  # the inner bash outlives a SIGTERM to its session (a trapped signal is reset in the command) to write the
  # command's exit status
  setsid nohup bash -c 'trap : TERM INT; echo $$ > "$1"; rc="$2"; shift 2; "$@"; echo $? > "$rc"' follow \
    "$pidfile" "$rcfile" "$@" \
    >> "$log" 2>&1 < /dev/null &
  for _ in $(seq 1 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
  el "started (pid $(cat "$pidfile" 2>/dev/null)): $*"
fi
while running && [ "$(date +%s)" -lt "$until_s" ]; do sleep 2; done
if running && [ -n "${STOP:-}" ]; then
  pid=$(cat "$pidfile")
  el "asked to stop (STOP=1)"
  if [ -n "${FOLLOW_STOP_FILE:-}" ]; then
    touch "$FOLLOW_STOP_FILE"
    for _ in $(seq 1 "${STOP_GRACE_S:-30}"); do running || break; sleep 1; done
  fi
  running && kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 1 "${STOP_GRACE_S:-30}"); do running || break; sleep 1; done
  running && kill -KILL -- "-$pid" 2>/dev/null
  sleep 1
fi
tail -c +$((from + 1)) "$log" | grep -vE "^\s*$" | grep -vE "${FOLLOW_DROP:-^\$^}" | tail -"${FOLLOW_TAIL:-80}"
if running; then
  el "still running: the next call (the same command, within the machine's idle release) follows it"
  exit 3
fi
el "ended, exit $(cat "$rcfile" 2>/dev/null || echo "unknown (killed)")"
exit 0
