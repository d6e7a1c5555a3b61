"""Where a native crash happened: the kernel's trap line, the library and its function.

When a process dies of a signal inside a shared library, Linux logs one line such as::

    traps: python[5397] general protection fault ip:7f4b9147c193 sp:7f4b7d2a5980 error:0
     in libggml-cpu.so.0[7c193,7f4b91414000+156000]

The offset in the brackets (newer kernels; older ones give only ``base+size``, then it is
``ip - base``) names the function through the library's symbols (``addr2line``). The
kernel's log is read from ``/dev/kmsg``, which an unprivileged process may not be allowed to
read (``kernel.dmesg_restrict``): then the site is simply unknown.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_TRAP = re.compile(
    r"(?P<what>general protection fault|segfault at \S+|trap invalid opcode|invalid opcode"
    r"|trap divide error|bus error)"
    r"(?:.*?\bip[: ](?P<ip>[0-9a-f]+))?"
    r".*?\bin (?P<library>[^\s\[]+)\[(?:(?P<offset>[0-9a-f]+),)?(?P<base>[0-9a-f]+)\+"
)


@dataclass(frozen=True)
class CrashSite:
    """A crash the kernel logged: what it was, in which library, at which function."""

    what: str
    library: str
    offset: int | None
    function: str | None = None

    def __str__(self) -> str:
        where = f"{self.library} ({self.function})" if self.function else self.library
        return f"{self.what} in {where}"


def parse_trap(line: str) -> CrashSite | None:
    """Return the crash a kernel log line reports, or None (a line about something else)."""
    match = _TRAP.search(line)
    if match is None:
        return None
    offset = None
    if match["offset"]:
        offset = int(match["offset"], 16)
    elif match["ip"]:
        offset = int(match["ip"], 16) - int(match["base"], 16)
    what = "segfault" if match["what"].startswith("segfault") else match["what"]
    return CrashSite(what=what, library=match["library"], offset=offset)


def kernel_lines_since(monotonic_start: float) -> list[str]:
    """Kernel log messages stamped after ``monotonic_start`` (`time.monotonic`), or []."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    lines: list[str] = []
    try:
        while True:
            try:
                record = os.read(fd, 8192).decode(errors="replace")
            except BlockingIOError:
                break
            except OSError:  # EPIPE: overwritten while reading; go on with the next
                continue
            head, _, message = record.partition(";")
            fields = head.split(",")
            if len(fields) >= 3 and int(fields[2]) / 1e6 >= monotonic_start - 1.0:
                lines.append(message.split("\n", 1)[0])
    finally:
        os.close(fd)
    return lines


def function_at(library: Path, offset: int) -> str | None:
    """The function of ``library`` at file ``offset``, by ``addr2line`` (None without it)."""
    tool = shutil.which("addr2line")
    if tool is None or not library.is_file():
        return None
    try:
        out = subprocess.run(
            [tool, "-f", "-C", "-e", str(library), hex(offset)],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = out.splitlines()[0].split("(", 1)[0].strip() if out else ""
    return name if name and name != "??" else None


def crash_site(monotonic_start: float, search: list[Path], wait_s: float = 1.0) -> CrashSite | None:
    """The newest crash the kernel logged since ``monotonic_start``, with its function.

    ``search`` holds the folders where the crashed library may be, to resolve its function.
    Waits up to ``wait_s`` for the line: the kernel may log it after the parent is told.
    """
    deadline = time.monotonic() + wait_s
    while True:
        sites = [s for s in map(parse_trap, kernel_lines_since(monotonic_start)) if s]
        if sites or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if not sites:
        return None
    site = sites[-1]
    if site.offset is not None:
        for folder in search:
            function = function_at(folder / site.library, site.offset)
            if function:
                return CrashSite(site.what, site.library, site.offset, function)
    return site
