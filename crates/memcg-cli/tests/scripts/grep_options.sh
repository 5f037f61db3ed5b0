# grep's common options, with GNU grep's meanings and exit statuses.
echo +memory > /cgroup.subtree_control
mkdir /a
echo 30M > /a/memory.max
# -E: an extended expression (alternation); the default is basic, where
# | is a literal and \| the operator.
grep -E 'oom|max' /a/memory.events
grep 'oom|max' /a/memory.events
echo "basic, bare |: $?"
grep 'oom_kill\|max ' /a/memory.events
# -F: fixed strings; -x: the whole line; -w: whole words.
grep -F -x 31457280 /a/memory.max
grep -w oom /a/memory.events
# -v, -c, -n, -i, several -e.
grep -c -v ' 0$' /a/memory.events
grep -n -e ^high -e ^low /a/memory.events
grep -i '^ANON ' /a/memory.stat
# -q: no output, status only; -l: the names of files that match.
grep -q zswpout /a/memory.stat
echo "-q: $?"
grep -l max /a/memory.events /a/memory.current
# --: what follows is not an option.
grep -- -x /a/memory.max
echo "--: $?"
# An option grep does not know, and a bad expression: status 2.
grep -z max /a/memory.max
echo "unknown option: $?"
grep -E '(max' /a/memory.events
echo "bad expression: $?"
