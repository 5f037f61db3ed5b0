#!/bin/bash
# scenario: memory.peak and memory.swap.peak take any write (it resets the
#   writer's own view); a fresh cgroup's peaks.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs peak "$(rd $T/a/memory.peak)"
obs swap_peak "$(rd $T/a/memory.swap.peak)"
for v in "reset" "x" "0" "-1" "\n" "reset\n" "max" "123456789012345678901234567890"; do
	obs "peak[$(label "$v")]" "$(try $T/a/memory.peak "$v")/$(rd $T/a/memory.peak)"
	obs "swap_peak[$(label "$v")]" "$(try $T/a/memory.swap.peak "$v")/$(rd $T/a/memory.swap.peak)"
done
