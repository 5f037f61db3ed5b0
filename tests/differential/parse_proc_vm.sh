#!/bin/bash
# scenario: the vm sysctls the simulator serves: swappiness bounds,
#   drop_caches values and its write-only mode, dirty ratios; each
#   restored after.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: default.* version
. "$(dirname "$0")/lib.sh"
V=/proc/sys/vm
for f in swappiness dirty_ratio dirty_background_ratio dirty_expire_centisecs dirty_writeback_centisecs; do
	old=$(cat $V/$f)
	obs "default.$f" "$old"
	battery $V/$f $f "0" "100" "200" "201" "-1" "x" " 50 " "50\n" "0x10" "1 2" "\n"
	wl $V/$f "$old" > /dev/null
done
obs drop_caches_read "$(rd $V/drop_caches)"
for v in 1 2 3 4 0 5 x -1 " 1 " "1\n" "0x1" "8"; do
	obs "drop_caches[$(label "$v")]" "$(try $V/drop_caches "$v")"
done
