#!/bin/bash
# One command in the sandbox, for images without python3 (one `docker exec` each):
#   bash -c "$(cat wrapper.sh)" planact RUN_ID TIMEOUT COMMAND
# Runs COMMAND in a process group of its own, kills that group after TIMEOUT seconds (a
# watchdog) and when COMMAND ends, and reports on the last line of stderr:
#   @planact:RUN_ID:EXIT_CODE:TIMED_OUT(0|1):OOM_KILLED(0|1)
# after a first stderr line "@planact-start:RUN_ID" (proof that a process started). The
# command's and the watchdog's group ids go to /tmp/.planact-RUN_ID for killer.sh. Runs as
# the exec's session leader; its own stderr goes to /dev/null (bash's job notices), the
# command's and the trailer to fd 3.
f=/tmp/.planact-$1
oomk() {
  K=0
  local x k v
  for x in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    if [ -r "$x" ]; then
      while read -r k v; do [ "$k" = oom_kill ] && K=$v; done < "$x"
      return 0
    fi
  done
}
oomk; o=$K
printf '@planact-start:%s\n' "$1" >&2
exec 3>&2 2>/dev/null
set -m
bash -c "$3" </dev/null 2>&3 3>&- &
c=$!
( sleep "$2"; : > "$f.t"; kill -KILL -- "-$c" ) </dev/null >/dev/null 3>&- &
w=$!
echo "$c $w" > "$f"
wait "$c"; rc=$?
kill -KILL -- "-$c" "-$w" 2>/dev/null
t=0; [ -e "$f.t" ] && t=1
oomk; m=0; [ "$K" != "$o" ] && m=1
rm -f -- "$f" "$f.t"
printf '\n@planact:%s:%s:%s:%s\n' "$1" "$rc" "$t" "$m" >&3
exit "$rc"
