#!/bin/bash
# scenario: a file tree on /mnt/fs (nested directories, rename across
#   directories and over a name, hard links, symlinks, unlink of an open
#   file): a cached file's pages stay charged to the cgroup that read them
#   under any of its names, until its last name and its last open
#   descriptor are gone; and the errnos the VFS gives for what it refuses,
#   as bash, rmdir and mkdir report them.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: file_* num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a $D/x/y/z
mkfile $D/x/y/z/f 8
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall $D/x/y/z/f
obs file_read "$(val $T/a/memory.stat file)"
mv $D/x/y/z/f $D/x/g
obs file_after_rename "$(val $T/a/memory.stat file)"
obs old_name_gone "$([ -e $D/x/y/z/f ] && echo present || echo gone)"
ln $D/x/g $D/h
obs nlink_two "$(stat -c %h $D/h)"
rm $D/x/g
obs nlink_one "$(stat -c %h $D/h)"
obs file_after_unlink_one_name "$(val $T/a/memory.stat file)"
exec 3< $D/h
rm $D/h
obs file_unlinked_open "$(val $T/a/memory.stat file)"
obs read_unlinked_open "$(dd bs=1M 2>/dev/null <&3 | wc -c)"
exec 3<&-
obs file_after_last_close "$(val $T/a/memory.stat file)"
# Rename over an existing name replaces it.
echo one > $D/r1
echo two > $D/r2
mv $D/r1 $D/r2
obs rename_over "$(cat $D/r2)/$([ -e $D/r1 ] && echo present || echo gone)"
# A symlink to a directory, followed in a path.
ln -s x/y $D/link
obs symlink_target "$(readlink $D/link)"
echo via > $D/link/z/s
obs through_symlink "$(cat $D/x/y/z/s)"
# What the kernel refuses, as errno names.
e() { "$@" 2> "$ERRF" > /dev/null; result; }
obs rmdir_not_empty "$(e rmdir $D/x)"
obs mkdir_exists "$(e mkdir $D/x)"
obs open_dir_for_write "$(e eval ": > $D/x")"
obs not_a_directory "$(e eval ": > $D/x/y/z/s/t")"
obs name_too_long "$(e eval ": > $D/$(printf 'n%.0s' $(seq 256))")"
ln -s loop1 $D/loop2
ln -s loop2 $D/loop1
obs symlink_loop "$(e eval "cat < $D/loop1")"
obs missing_parent "$(e eval ": > $D/nowhere/f")"
rm -r $D/x
obs tree_removed "$([ -e $D/x ] && echo present || echo gone)"
