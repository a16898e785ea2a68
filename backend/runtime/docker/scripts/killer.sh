#!/bin/bash
# Kill the command of a wrapper.sh run (its process group and its watchdog's):
#   bash -c "$(cat killer.sh)" planact-kill RUN_ID
# Waits up to a second for the wrapper to have written the group ids.
f=/tmp/.planact-$1; i=0
while [ ! -s "$f" ] && [ "$i" -lt 100 ]; do sleep 0.01; i=$((i+1)); done
if [ -s "$f" ]; then read -r c w < "$f"; kill -KILL -- "-$c" "-$w" 2>/dev/null; fi
exit 0
