#!/bin/bash
# scenario: memory.min's parser (page_counter_memparse): suffixes, bases,
#   `max`, whitespace, overflow and the errnos of what it refuses; each
#   write's result and what the file reads after it.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs default "$(rd $T/a/memory.min)"
battery $T/a/memory.min min "${MEMPARSE_VALUES[@]}"
