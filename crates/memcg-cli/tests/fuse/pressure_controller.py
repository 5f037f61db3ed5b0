"""A senpai-like memory.high controller, run by tests/fuse.rs under
`memcg run --workload 'kbuild ... --cgroup /build'`.

Once a second it reads the build's memory.pressure ("some avg10") and
moves memory.high: down 10% while the pressure is below the target (the
build can give memory back), up 10% when it is above (it is stalling),
never below a floor. It prints one line per round: the pressure it read,
the old and new memory.high, and what memory.high reads back.
"""
import sys
import time

CG = "/sys/fs/cgroup/build"
TARGET_AVG10 = 1.0
FLOOR = 8 << 20


def read(name):
    with open(f"{CG}/{name}") as f:
        return f.read()


def some_avg10():
    for line in read("memory.pressure").splitlines():
        if line.startswith("some "):
            return float(line.split()[1].split("=")[1])
    raise ValueError("no 'some' line in memory.pressure")


def main(rounds):
    for _ in range(100):
        try:
            current = int(read("memory.current"))
            break
        except FileNotFoundError:
            time.sleep(0.1)
    else:
        sys.exit("the workload's cgroup never appeared")
    high = max(current, FLOOR)
    for _ in range(rounds):
        time.sleep(1)
        pressure = some_avg10()
        factor = 0.9 if pressure < TARGET_AVG10 else 1.1
        new = max(int(high * factor), FLOOR) // 4096 * 4096
        with open(f"{CG}/memory.high", "w") as f:
            f.write(f"{new}\n")
        print(pressure, high, new, read("memory.high").strip(), flush=True)
        high = new


main(int(sys.argv[1]))
