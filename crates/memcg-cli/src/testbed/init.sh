#!/bin/bash
# The test bed guest's /init: mounts the kernel's filesystems, loads the
# modules the host chose, sets the machine up as the kernel command line's
# memcg.* options say, runs /share/in/script as root, leaves its stdout,
# stderr and status in /share/out, and powers off. Host side:
# crates/memcg-cli/src/testbed/qemu.rs.
export PATH=/sbin:/bin:/usr/sbin:/usr/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts
mount -t debugfs debugfs /sys/kernel/debug

fail() { echo "testbed init: $*" >&2; echo "$*" > /dev/ttyS0; poweroff -f; }

# memcg.NAME=VALUE words of the command line, as OPT_NAME variables.
for word in $(cat /proc/cmdline); do
    case $word in
    memcg.*=*) name=${word#memcg.}; name=${name%%=*}; eval "OPT_${name}=\"\${word#*=}\"" ;;
    esac
done

while read -r module args; do
    why=$(insmod "/lib/modules/$module.ko" $args 2>&1) || fail "insmod $module failed: $why"
done < /lib/modules/load-order

mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 share /share || fail "no 9p share"
mkdir -p /share/out
exec 2>/share/out/init.log
ip link set lo up

mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail "no cgroup2"
echo +memory > /sys/fs/cgroup/cgroup.subtree_control

if [ -e /sys/kernel/mm/lru_gen/enabled ]; then
    [ "$OPT_mglru" = on ] || echo n > /sys/kernel/mm/lru_gen/enabled
fi
[ "$OPT_zswap" = on ] && echo 1 > /sys/module/zswap/parameters/enabled

case $OPT_swap in
zram:*)
    insmod /lib/modules/zram.ko num_devices=1 || fail "insmod zram failed"
    echo "${OPT_swap#zram:}" > /sys/block/zram0/disksize
    mkswap /dev/zram0 >/dev/null && swapon /dev/zram0 || fail "zram swap failed" ;;
disk) mkswap /dev/vda >/dev/null && swapon /dev/vda || fail "disk swap failed" ;;
esac

if [ -n "$OPT_brd" ]; then
    insmod /lib/modules/brd.ko rd_nr=1 rd_size="$OPT_brd" || fail "insmod brd failed"
    case $OPT_fs in
    ext4) why=$(mke2fs -q -t ext4 /dev/ram0 2>&1) ;;
    *) why=$(mkfs.xfs -q -f /dev/ram0 2>&1) ;;
    esac || fail "mkfs $OPT_fs on a ${OPT_brd}K brd failed: ${why%%$'\n'*}"
    mkdir -p /mnt/fs && mount /dev/ram0 /mnt/fs || fail "mount /mnt/fs failed"
fi

cd /share/in || fail "no /share/in"
ARGS=()
[ -e args ] && mapfile -t ARGS < args
MEMCG_ENV=kernel bash ./script "${ARGS[@]}" > /share/out/stdout 2> /share/out/stderr < /dev/null
echo $? > /share/out/status
dmesg > /share/out/dmesg
sync
poweroff -f
