#!/bin/bash
# scenario: the anonymous transparent huge page settings
#   (/sys/kernel/mm/transparent_hugepage/enabled and each mTHP size's
#   hugepages-<size>kB/enabled): the sizes, the defaults, and which
#   writes each takes (sysfs_streq: one trailing newline); restored after.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
H=/sys/kernel/mm/transparent_hugepage
obs sizes "$(cd $H && ls hugepages-*/enabled | tr "\n" ,)"
obs default.enabled "$(rd $H/enabled)"
for s in 16 32 64 128 256 512 1024 2048; do
	obs "default.$s" "$(rd $H/hugepages-${s}kB/enabled)"
done
battery $H/hugepages-64kB/enabled mthp64 "always" "inherit" "madvise" "never" \
	"always\n" "Always" " always" "always " "always\n\n" "x" "\n"
battery $H/enabled enabled "madvise" "never" "always" "inherit" "always\n" "x"
wl $H/hugepages-64kB/enabled never > /dev/null
wl $H/enabled always > /dev/null
