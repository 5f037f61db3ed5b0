#!/bin/bash
# scenario: memory.reclaim's grammar on an empty cgroup: a valid request
#   finds nothing to reclaim (EAGAIN), 0 bytes succeeds, a bad size or
#   key is EINVAL; swappiness bounds (and `max`, 7.3's anon-only).
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: reclaim[1M_swappiness:max] version
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs read "$(rd $T/a/memory.reclaim)"
for v in "0" "1M" "4K" "1" "\n" "x" "-1" "1M\n" " 1M " "1M swappiness=0" "1M swappiness=200" \
	"1M swappiness=201" "1M swappiness=-1" "1M swappiness=max" "1M swappiness=" "1M swappiness=60x" \
	"1M foo" "1M foo=1" "1M  swappiness=60" "swappiness=60" "1M swappiness=60 swappiness=10" \
	"0 swappiness=0" "0 swappiness=300" "max" "0x100000" "1MB" "1M,swappiness=1"; do
	obs "reclaim[$(label "$v")]" "$(try $T/a/memory.reclaim "$v")"
done
