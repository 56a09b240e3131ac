"""One warm LibreOffice per parsing server, converting legacy files to OOXML under limits.

LibreOffice reads `.doc`, `.ppt` and `.rtf` faithfully (headings, lists, tables) and writes
DOCX or PPTX, which the existing extractors then read; a cold start costs several times a
warm instance's conversion (BENCHMARKS.md, "Legacy formats"). So each fork server
(`docingest.pipeline.isolation.child`, one per job slot) keeps one instance: it starts it when a
file that starts like a legacy Office or RTF file comes (`warm_for`, a peek at 8 bytes, before the
parsing child is forked), and the parsing child inherits its pipe name and converts through
it (`convert`). Outside a fork server (isolation off, tests) the process keeps its own.

Limits: the instance runs under `prlimit` with the child's address-space limit, in a session
and process group of its own, and dies with the process that started it (`setpriv
--pdeathsig`). A conversion may use as many of the instance's CPU seconds, and twice as many
wall seconds plus 30, as the parsing child has CPU seconds; past either, the whole process
group is killed (`timeout`) and the next file starts a new instance. The instance is also
replaced after `RECYCLE_AFTER` files, so what one file leaves behind cannot grow for long.
Files are loaded hidden, read-only, with macros never executed and links never updated
(`bridge.py`).
"""

from __future__ import annotations

import atexit
import logging
import os
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from docingest.pipeline.errors import CorruptDocument, ExtractionTimeout, UnsupportedFormat

log = logging.getLogger(__name__)

SOFFICE_CANDIDATES = (
    "/usr/lib/libreoffice/program/soffice.bin",
    "/opt/libreoffice/program/soffice.bin",
)
"""Where Debian's `libreoffice-*-nogui` packages (and the upstream tarball) put the binary;
it is started directly, not through the `soffice` shell script and `oosplash`, so that the
limits and the death signal apply to the process that parses."""
UNO_PYTHON = "/usr/bin/python3"
"""The interpreter Debian's `python3-uno` is built for; `bridge.py` runs under it."""
BRIDGE = Path(__file__).with_name("bridge.py")

RECYCLE_AFTER = 200
"""Files one instance converts before it is replaced by a fresh one."""
_POLL_SECONDS = 0.05
_STARTUP_SECONDS = 120.0
_LEGACY_MAGICS = (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", b"{\\rtf")
_BRIDGE_NO_INSTANCE, _BRIDGE_LOAD_FAILED, _BRIDGE_STORE_FAILED = 2, 3, 4
_OPTIONS = (
    "--headless", "--invisible", "--norestore", "--nologo", "--nodefault", "--nolockcheck",
)  # fmt: skip


def soffice_path() -> str | None:
    """The LibreOffice binary, or None when it is not installed."""
    return next((path for path in SOFFICE_CANDIDATES if os.access(path, os.X_OK)), None)


def available() -> bool:
    """Whether this machine can convert legacy files (LibreOffice and python3-uno)."""
    return soffice_path() is not None and os.access(UNO_PYTHON, os.X_OK)


@dataclass
class Office:
    """A LibreOffice instance listening on a named UNO pipe, owned by the process that
    started it (only that one can reap it); others (forked children) may use and kill it."""

    memory_bytes: int
    profile: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="docingest-lo-")))
    pipe: str = ""
    pid: int | None = None
    owner: int = 0
    conversions: int = 0

    def alive(self) -> bool:
        return self.pid is not None and _running(self.pid)

    def ensure(self) -> None:
        """Start the instance unless it is running (and not due to be replaced)."""
        recycle = self.conversions >= RECYCLE_AFTER and self.owner == os.getpid()
        if self.alive() and not recycle:
            return
        self.stop()
        program = soffice_path()
        if program is None or not os.access(UNO_PYTHON, os.X_OK):
            raise UnsupportedFormat(_MISSING)
        profile = [f"-env:UserInstallation={self.profile.as_uri()}"]
        if not (self.profile / "user").exists():  # first start: make the profile, then exit
            subprocess.run(
                [program, *profile, *_OPTIONS, "--terminate_after_init"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                timeout=_STARTUP_SECONDS, check=False,
            )  # fmt: skip
        self.pipe = f"docingest-{os.getpid()}-{secrets.token_hex(6)}"
        process = subprocess.Popen(
            [
                "setpriv", "--pdeathsig", "KILL",
                "prlimit", f"--as={self.memory_bytes}", "--core=0", "--",
                program, *profile, *_OPTIONS, f"--accept=pipe,name={self.pipe};urp;",
            ],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, env=_environment(),
        )  # fmt: skip
        process.returncode = 0  # reaped by `stop`/`reap` with waitpid, never by Popen
        self.pid, self.owner, self.conversions = process.pid, os.getpid(), 0

    def stop(self) -> None:
        """Kill the instance's whole process group (a hung one included)."""
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.reap()
        self.pid = None

    def reap(self) -> None:
        """Collect the instance's exit status if this process started it and it has ended."""
        if self.pid is None or self.owner != os.getpid():
            return
        try:
            if self.alive():
                return
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = None

    def convert(
        self, data: bytes, *, suffix: str, export_filter: str, target: str, cpu_seconds: float
    ) -> bytes:
        """`data` (a file named `*suffix`) converted with `export_filter`, as bytes of a
        `*target` file. Raises `ExtractionTimeout` past the budget, `CorruptDocument` when
        LibreOffice cannot open the file or dies on it.

        A warm instance that fails a file is replaced and the file tried once more: the
        instance itself may be what failed (a `.ppt` that converts alone failed once as the
        ninth file of an instance, under a CPU hog), and a fresh one decides."""
        for attempt in (1, 2):
            self.ensure()
            converted_before = self.conversions
            converted, status, complaint = self._convert_once(
                data, suffix=suffix, export_filter=export_filter, target=target, cpu=cpu_seconds
            )
            if converted is not None:
                return converted
            if status == _BRIDGE_NO_INSTANCE:
                self.stop()
                raise ExtractionTimeout("LibreOffice did not start in time to convert this file.")
            if not converted_before or attempt == 2:
                break
            log.warning(
                "LibreOffice failed a file after %d conversions (status %d: %s); "
                "trying it once more on a fresh instance",
                converted_before, status, complaint or "no message",
            )  # fmt: skip
            self.stop()
        raise CorruptDocument(
            "LibreOffice could not open this file: it is damaged, or not what it looks like."
        )

    def _convert_once(
        self, data: bytes, *, suffix: str, export_filter: str, target: str, cpu: float
    ) -> tuple[bytes | None, int, str]:
        """One conversion: (the converted bytes or None, the bridge's exit status, the last
        line it wrote to stderr)."""
        workdir = Path(tempfile.mkdtemp(prefix="docingest-convert-"))
        try:
            source, output = workdir / f"input{suffix}", workdir / f"output{target}"
            errors = workdir / "bridge.err"
            source.write_bytes(data)
            status = self._run_bridge(source, output, export_filter, cpu, errors)
            self.conversions += 1
            if status == 0 and output.exists():
                return output.read_bytes(), status, ""
            lines = errors.read_text(errors="replace").strip().splitlines()
            return None, status, lines[-1][:300] if lines else ""
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run_bridge(
        self, source: Path, output: Path, export_filter: str, cpu: float, errors: Path
    ) -> int:
        assert self.pid is not None
        with errors.open("wb") as stderr:
            bridge = subprocess.Popen(
                [UNO_PYTHON, "-I", str(BRIDGE), self.pipe, str(source), str(output), export_filter],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                close_fds=True, env=_environment(),
            )  # fmt: skip
        start_cpu, started = _cpu_seconds(self.pid), time.monotonic()
        wall = 2.0 * cpu + 30.0
        while (status := bridge.poll()) is None:
            used = _cpu_seconds(self.pid) - start_cpu
            if not self.alive() or used > cpu or time.monotonic() - started > wall:
                crashed = not self.alive()
                bridge.kill()
                bridge.wait()
                self.stop()
                if crashed:
                    raise CorruptDocument("LibreOffice crashed or ran out of memory on this file.")
                raise ExtractionTimeout(
                    f"Converting this file took LibreOffice more than {cpu:.0f} CPU seconds "
                    f"or {wall:.0f} seconds; it was stopped."
                )
            time.sleep(_POLL_SECONDS)
        return status


_MISSING = (
    "Legacy Office and RTF files are read through LibreOffice, which this server does not "
    "have: install Debian's libreoffice-writer-nogui, libreoffice-impress-nogui and "
    "python3-uno (the image and `make run` do), or save the file as DOCX or PPTX."
)


def _environment() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.setdefault("HOME", tempfile.gettempdir())
    env["SAL_USE_VCLPLUGIN"] = "svp"  # no display
    return env


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds `pid` has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_WARM: Office | None = None
"""This process's instance (inherited by forked parsing children)."""


def warm_instance(memory_bytes: int) -> Office:
    """This process's instance, made (not started) on first use."""
    global _WARM
    if _WARM is None or _WARM.memory_bytes != memory_bytes:
        if _WARM is not None:
            _WARM.stop()
        _WARM = Office(memory_bytes)
    return _WARM


def warm_for(path: str, memory_bytes: int) -> None:
    """In a fork server, before forking the child that parses `path`: start (or keep) the
    instance when the file starts like a legacy Office (OLE2) or RTF file. A peek at its
    first bytes, nothing parsed; a failure to start is the child's to report."""
    try:
        with open(path, "rb") as file:
            head = file.read(8)
    except OSError:
        return
    if head.startswith(_LEGACY_MAGICS) and available():
        office = warm_instance(memory_bytes)
        try:
            office.ensure()
        except (OSError, subprocess.SubprocessError, UnsupportedFormat):
            return
        office.conversions += 1  # the child's own count is lost with it


def after_child(*, killed: bool) -> None:
    """In a fork server, once a parsing child has exited: reap an instance that died, and
    kill one the child was using when it was killed (it may be hung on that file)."""
    if _WARM is None:
        return
    if killed:
        _WARM.stop()
    else:
        _WARM.reap()


def cpu_budget(default: float) -> float:
    """The CPU seconds a conversion may take: this process's own CPU limit (the parsing
    child's budget), or `default` where there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_CPU)
    return float(default if soft == resource.RLIM_INFINITY else soft)


@atexit.register
def _stop_owned() -> None:
    if _WARM is not None and _WARM.owner in (os.getpid(), 0):
        _WARM.stop()
        shutil.rmtree(_WARM.profile, ignore_errors=True)
