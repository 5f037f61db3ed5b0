#!/bin/bash
# scenario: PSI's shape (not its values): memory.pressure's two lines,
#   /proc/pressure/memory's, cgroup.pressure's switch and what reading a
#   switched-off memory.pressure gives, a malformed trigger.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
shape() {
	sed -E 's/avg(10|60|300)=[0-9]+\.[0-9][0-9]/avg\1=F/g; s/total=[0-9]+/total=N/' "$1" | tr '\n' '|' | sed 's/|$//'
}
obs child "$(shape $T/a/memory.pressure)"
obs root "$(shape $CG/memory.pressure)"
obs proc "$(shape /proc/pressure/memory)"
obs cgroup_pressure "$(rd $T/a/cgroup.pressure)"
obs off "$(wl $T/a/cgroup.pressure 0)/$(rd $T/a/cgroup.pressure)"
obs read_off "$(rd $T/a/memory.pressure)"
battery $T/a/cgroup.pressure cgroup.pressure "2" "-1" "x" "1" " 0 " "1\n"
obs read_on "$(shape $T/a/memory.pressure)"
obs trigger_bad "$(wl $T/a/memory.pressure 'some x y')"
obs trigger_kind "$(wl $T/a/memory.pressure 'bogus 150000 1000000')"
obs trigger_window_small "$(wl $T/a/memory.pressure 'some 150000 100')"
obs trigger_ok "$(wl $T/a/memory.pressure 'some 150000 1000000')"
obs trigger_proc_ok "$(wl /proc/pressure/memory 'full 150000 1000000')"
