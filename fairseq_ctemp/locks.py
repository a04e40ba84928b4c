"""Who holds a directory's .lock now: the recipes' SAVE_DIR lock (examples/run_options.sh) and the
ALT sweeps' run lock (alt.common.Lock) are flocks on DIR/.lock, whose file names the holder ("pid N
on HOST"). The status and plan commands say so for a run being worked on."""

import os


def holder(lock):
    """The holder LOCK's file names, or None where no one holds it. Read from the kernel's list of
    locks (/proc/locks) rather than by trying the lock, which would make a process starting in
    that instant fail; where that list is absent (not Linux), names the file otherwise (some
    layered filesystems) or the holder is another host of a shared filesystem, the lock is not
    seen (None)."""
    try:
        with open("/proc/locks", encoding="utf-8") as f:
            held = {line.split()[5] for line in f if len(line.split()) > 5}
        st = os.stat(lock)
    except OSError:
        return None
    if f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}" not in held:
        return None
    with open(lock, encoding="utf-8", errors="replace") as f:
        return f.read().strip() or "another process"
