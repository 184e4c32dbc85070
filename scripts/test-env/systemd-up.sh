#!/bin/bash
# Start a PRIVATE systemd manager (`systemd --user`, running as root) whose
# org.freedesktop.systemd1.Manager API answers on its own D-Bus, for tests of the systemd
# cgroup driver. Works on hosts whose PID 1 is not systemd. Several instances can run side
# by side: the one name that is global on the host (its cgroup) is derived from BASE.
# Tear down with systemd-down.sh <same BASE>.
#
# Usage: systemd-up.sh [BASE]     (or env RKUBELET_SYSTEMD_BASE; default /tmp/rkubelet-systemd)
# Env:   SYSTEMD_BIN        the systemd binary (default /lib/systemd/systemd)
#        SYSTEMD_LOG_LEVEL  its log level (default info); the log is $BASE/console.log
# Prints the path of $BASE/env, a file to source:
#   DBUS_SYSTEM_BUS_ADDRESS  unix:path=$BASE/run/bus (the bus the manager is on; the name
#                            the systemd adapter reads when given no address)
#   RKUBELET_SYSTEMD_CONTROL_GROUP  the manager's root cgroup (its units live below it)
#   RKUBELET_SYSTEMD_PID, RKUBELET_SYSTEMD_BASE, RKUBELET_SYSTEMD_CGROUP_NAME, XDG_RUNTIME_DIR
#
# Why the wrapping:
#  * `systemd --user` refuses to run unless /run/systemd/system/ exists ("system has not
#    been booted with systemd"): it gets a private tmpfs over /run/systemd holding that
#    directory, in a private mount namespace, so the host never sees it.
#  * started in the root cgroup, it takes "/" as its root and moves EVERY process of the
#    machine into its init.scope. So it first joins a dedicated cgroup in every hierarchy;
#    that cgroup becomes its root and everything it creates lives below it.
#  * its "console" log target writes only to a tty: it runs under script(1), whose pty is
#    bound over /dev/console inside the namespace and copied into $BASE/console.log.
#  * its session dbus-daemon is socket-activated at $XDG_RUNTIME_DIR/bus (dbus-user-session).
set -euo pipefail

BASE=${1:-${RKUBELET_SYSTEMD_BASE:-/tmp/rkubelet-systemd}}
SYSTEMD=${SYSTEMD_BIN:-/lib/systemd/systemd}
alive() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t0=$(date +%s%N)

[ "$(id -u)" = 0 ] || { echo "systemd-up.sh: must run as root" >&2; exit 1; }
[ -x "$SYSTEMD" ] || { echo "systemd-up.sh: $SYSTEMD missing; run install-deps.sh" >&2; exit 1; }
for b in busctl unshare dbus-daemon; do
    command -v "$b" >/dev/null || { echo "systemd-up.sh: $b missing; run install-deps.sh" >&2; exit 1; }
done
[ -f /usr/lib/systemd/user/dbus.socket ] || [ -f /lib/systemd/user/dbus.socket ] \
    || { echo "systemd-up.sh: dbus-user-session missing; run install-deps.sh" >&2; exit 1; }

mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd -P)
RUNTIME=$BASE/run
PIDFILE=$BASE/systemd.pid
LOG=$BASE/console.log
BUS=unix:path=$RUNTIME/bus
# sun_path is 108 bytes; systemd's own sockets sit deeper than the bus
if [ $((${#RUNTIME} + 40)) -ge 108 ]; then
    echo "systemd-up.sh: base dir path too long for unix sockets: $BASE" >&2; exit 1
fi

if [ -f "$PIDFILE" ] && alive "$(cat "$PIDFILE")" \
    && busctl --address="$BUS" status >/dev/null 2>&1; then
    echo "systemd-up.sh: already running (pid $(cat "$PIDFILE"))" >&2
    echo "$BASE/env"
    exit 0
fi

CG_NAME=rksd-$(printf '%s' "$BASE" | sha256sum | cut -c1-12)
# Marker + name first: systemd-down.sh trusts only these files, never the environment.
touch "$BASE/.rkubelet-systemd"
echo "$CG_NAME" > "$BASE/cgroup.name"

# every cgroup mount: v1 hierarchies, the hybrid cgroup2, or a pure v2 /sys/fs/cgroup
mapfile -t HIER < <(awk '($3=="cgroup" || $3=="cgroup2") && $2 ~ /^\/sys\/fs\/cgroup(\/|$)/ {print $2}' /proc/self/mounts | sort -u)
[ ${#HIER[@]} -gt 0 ] || { echo "systemd-up.sh: no cgroup hierarchy mounted" >&2; exit 1; }
for h in "${HIER[@]}"; do
    if [ -d "$h/$CG_NAME" ] && { [ -s "$h/$CG_NAME/cgroup.procs" ] \
          || [ -n "$(find "$h/$CG_NAME" -mindepth 1 -type d -print -quit)" ]; }; then
        echo "systemd-up.sh: cgroup $h/$CG_NAME is in use (stale instance? run systemd-down.sh $BASE)" >&2
        exit 1
    fi
done
for h in "${HIER[@]}"; do
    mkdir -p "$h/$CG_NAME"
    # v1 cpuset: a new group starts with empty cpus/mems and refuses tasks until they are set
    if [ -f "$h/$CG_NAME/cpuset.cpus" ]; then
        [ -n "$(cat "$h/$CG_NAME/cpuset.cpus")" ] || cat "$h/cpuset.cpus" > "$h/$CG_NAME/cpuset.cpus"
        [ -n "$(cat "$h/$CG_NAME/cpuset.mems")" ] || cat "$h/cpuset.mems" > "$h/$CG_NAME/cpuset.mems"
    fi
done

rm -rf "$RUNTIME"
mkdir -p "$RUNTIME"
chmod 700 "$RUNTIME"
: > "$LOG"
rm -f "$PIDFILE"

export PIDFILE RUNTIME SYSTEMD CG_NAME HIER_LIST="${HIER[*]}" LEVEL="${SYSTEMD_LOG_LEVEL:-info}"
# The launcher joins the cgroup, enters a private mount namespace, then execs systemd, so
# $PIDFILE holds systemd's own pid.
cat > "$BASE/launch.sh" <<'LAUNCH'
#!/bin/sh
for h in $HIER_LIST; do echo $$ > "$h/$CG_NAME/cgroup.procs"; done
exec unshare --mount --propagation private -- /bin/sh -c '
    mount -t tmpfs -o mode=0755 tmpfs /run/systemd
    mkdir -p /run/systemd/system
    if t=$(tty 2>/dev/null); then mount --bind "$t" /dev/console; else mount --bind /dev/null /dev/console; fi
    echo $$ > "$PIDFILE"
    unset DBUS_SESSION_BUS_ADDRESS DBUS_SYSTEM_BUS_ADDRESS NOTIFY_SOCKET
    export XDG_RUNTIME_DIR="$RUNTIME"
    exec "$SYSTEMD" --user --log-level="$LEVEL" --log-target=console
'
LAUNCH
chmod +x "$BASE/launch.sh"
# setsid: own session, so the caller's terminal/job-control signals do not reach it
if command -v script >/dev/null; then
    setsid script -qfec "$BASE/launch.sh" "$LOG" </dev/null >/dev/null 2>&1 &
else
    setsid "$BASE/launch.sh" </dev/null >>"$LOG" 2>&1 &
fi
echo $! > "$BASE/launcher.pid"
for _ in $(seq 1 250); do [ -s "$PIDFILE" ] && break; sleep 0.02; done
[ -s "$PIDFILE" ] || { echo "systemd-up.sh: systemd did not start; log:" >&2; tail -30 "$LOG" >&2; exit 1; }
PID=$(cat "$PIDFILE")
t1=$(date +%s%N)

# Ready = the manager answers on the bus (the bus daemon is socket-activated by the manager,
# so an answer proves both) and has finished starting up.
state=''
for _ in $(seq 1 200); do
    if [ -S "$RUNTIME/bus" ] && state=$(busctl --address="$BUS" get-property org.freedesktop.systemd1 \
            /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager SystemState 2>/dev/null); then
        case "$state" in *'"running"'*|*'"degraded"'*) break ;; esac
    fi
    alive "$PID" || break
    sleep 0.05
done
case "$state" in
    *'"running"'*|*'"degraded"'*) ;;
    *) echo "systemd-up.sh: manager not ready (state: ${state:-no answer}); log:" >&2
       tail -30 "$LOG" >&2; exit 1 ;;
esac
CG=$(busctl --address="$BUS" get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 \
        org.freedesktop.systemd1.Manager ControlGroup | sed -n 's/^s "\(.*\)"$/\1/p')
[ -n "$CG" ] || { echo "systemd-up.sh: could not read the manager's ControlGroup" >&2; exit 1; }
t2=$(date +%s%N)

cat > "$BASE/env" <<EOT
export RKUBELET_SYSTEMD_BASE=$BASE
export DBUS_SYSTEM_BUS_ADDRESS=$BUS
export XDG_RUNTIME_DIR=$RUNTIME
export RKUBELET_SYSTEMD_CONTROL_GROUP=$CG
export RKUBELET_SYSTEMD_PID=$PID
export RKUBELET_SYSTEMD_CGROUP_NAME=$CG_NAME
EOT
echo "systemd-up.sh: pid $PID, bus $BUS, ControlGroup $CG" \
     "(start $(( (t1 - t0) / 1000000 )) ms, ready $(( (t2 - t1) / 1000000 )) ms, total $(ms "$t0") ms)" >&2
echo "$BASE/env"
