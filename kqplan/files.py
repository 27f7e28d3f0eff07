"""Files kqplan reads and writes, through one door each way.

Reading: :func:`read_bounded` (and :func:`checked_input` for files a library streams) accepts
regular files only, under a size limit, never blocks on a FIFO and never follows ``/dev/zero``
until memory runs out; the refusal names the file and the limit. Writing: :func:`write_atomically`
replaces a file so that a crash leaves the old file or the new one, never a torn one; it writes
through a symlink to its target, keeps an existing file's mode and creates new files with the
usual umask, and the missing directories of the path given (``mkdir -p``; nothing is created
before the file is written). :func:`write_all` writes a set of files all-or-nothing, as far as a
file system allows (every file written first, then each renamed). :func:`inside` joins every
output path under its ``--out`` directory, refusing names that would leave it."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError
from kqplan.core.filenames import component_problem

MIB = 1024 * 1024
DEFAULT_INPUT_LIMIT = 512 * MIB
"""Default bound of a file read whole (snapshot, seed, saved plan, client properties, …):
``[limits] max-input-mib`` in kqplan.toml changes it."""
NAME_MAX = 255
"""Bytes in one file name on the usual file systems (ext4, XFS, APFS, NTFS counts UTF-16 units)."""
TEMP_NAME_ROOM = 24
"""Bytes a temporary sibling's name adds to the final name (``.NAME.XXXXXXXX.tmp``)."""


def _refused(path: Path, what: str, problem: str, hint: str | None = None) -> KqplanError:
    return KqplanError(f"cannot read {what} {_shown(path)}: {problem}", hint=hint)


INPUT_LIMIT_HINT = "raise [limits] max-input-mib in kqplan.toml if the file is right"


def _open_regular(path: Path, what: str, limit: int, hint: str) -> tuple[int, int]:
    """Open ``path`` for reading without blocking (a FIFO must not hang us), refuse anything but
    a regular file or one over ``limit`` bytes (``hint`` says what to do then): (fd, size)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refused(path, what, exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise _refused(path, what, f"it is {kind}, not a regular file",
                           hint="name a regular file (kqplan does not read devices, FIFOs or sockets)")
        if st.st_size > limit:
            raise _too_big(path, what, st.st_size, limit, hint)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _amount(size: int) -> str:
    return f"{size / MIB:.1f} MiB" if size >= MIB else f"{size} byte{'' if size == 1 else 's'}"


def _too_big(path: Path, what: str, size: int, limit: int, hint: str) -> KqplanError:
    shown = f"it is {_amount(size)}" if size >= 0 else "it is longer"
    limit_shown = f"{limit // MIB} MiB" if limit % MIB == 0 else _amount(limit)
    return _refused(path, what, f"{shown}, over the {limit_shown} limit", hint=hint)


def checked_input(path: Path, *, what: str = "file", limit: int | None = None,
                  too_big_hint: str = INPUT_LIMIT_HINT) -> int:
    """Check that ``path`` is a readable regular file of at most ``limit`` bytes (no limit when
    None) before a library streams it; its size."""
    fd, size = _open_regular(path, what, limit if limit is not None else 2**63 - 1, too_big_hint)
    os.close(fd)
    return size


def read_bounded(path: Path, *, what: str = "file", limit: int = DEFAULT_INPUT_LIMIT,
                 too_big_hint: str = INPUT_LIMIT_HINT) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (a file that grows while
    read, or a /proc file that says it is empty, is bounded too); a KqplanError naming the file,
    what it is for and the limit otherwise, with ``too_big_hint`` when it is too large."""
    fd, size = _open_regular(path, what, limit, too_big_hint)
    chunks: list[bytes] = []
    total = 0
    try:
        with os.fdopen(fd, "rb", closefd=True) as fh:
            # the size fstat gave first, then chunks up to the bound: a file longer than it says
            # (a /proc file says 0) is bounded without a buffer the size of the bound
            want = min(size, limit) + 1
            while want > 0:
                chunk = fh.read(want)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                want = min(_CHUNK, limit + 1 - total)
    except OSError as exc:
        raise _refused(path, what, exc.strerror or str(exc)) from None
    if total > limit:
        raise _too_big(path, what, -1, limit, too_big_hint)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_CHUNK = 4 * MIB


def read_bounded_text(path: Path, *, what: str = "file", limit: int = DEFAULT_INPUT_LIMIT) -> str:
    """:func:`read_bounded` decoded as UTF-8 (a BOM is allowed); a KqplanError when it is not."""
    data = read_bounded(path, what=what, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _refused(path, what, f"line {line} is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                       hint="save the file as UTF-8") from None


def inside(out: Path, *names: str) -> Path:
    """``out / names[0] / names[1] …``, where each name is one plain file name: never absolute,
    never ``..``, no separator, nothing a file system would treat specially. Every output path
    kqplan derives from a name it did not choose itself goes through here."""
    path = out
    for name in names:
        problem = component_problem(name)
        if problem is not None:
            raise KqplanError(f"cannot write {visible(name)!r} under {visible(str(out))}: {problem}",
                              hint="names used as file names must be plain names (letters, digits, "
                              "'.', '_', '-'), not paths")
        path = path / name
    return path


def _shown(path: Path) -> str:
    """A path as messages print it: every non-printable character escaped."""
    return visible(str(path))


def _umask() -> int:
    """The process's umask, read without changing it (Linux ≥ 4.7), else by setting it back."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _std_fd(path: Path) -> int | None:
    """1 or 2 when ``path`` is this process's stdout or stderr (``/dev/stdout`` redirected to a
    file is that file: replacing it by a rename would lose what was printed to it)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    for fd in (1, 2):
        try:
            std = os.fstat(fd)
        except OSError:
            continue
        if (std.st_dev, std.st_ino) == (st.st_dev, st.st_ino):
            return fd
    return None


def _is_stream(path: Path) -> bool:
    """A FIFO, a terminal or a device (``/dev/stdout``, ``/dev/null``), or stdout or stderr
    whatever they are: written in place, as a stream, since it cannot be replaced by a rename."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode) or _std_fd(path) is not None


def _target(path: Path) -> Path:
    """Where writing ``path`` lands: a symlink's target (the link stays a link), else ``path``."""
    return Path(os.path.realpath(path)) if path.is_symlink() and not _is_stream(path) else path


def _unwritable(path: Path) -> tuple[str, str | None] | None:
    """Why ``path`` cannot be written and what to do, or None (see :func:`check_writable`)."""
    if _is_stream(path):
        if _std_fd(path) is None and stat.S_ISFIFO(os.stat(path).st_mode):
            try:  # a FIFO nobody reads would fail only after the work is done
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                return f"it is a FIFO that cannot be written now ({exc.strerror or exc})", None
        return None
    try:
        os.stat(path)
    except OSError as exc:  # a dangling link or a new file is fine: writing creates it
        if exc.errno == errno.ELOOP:
            return "it is a symbolic link that loops (or one of its directories is)", \
                "remove the link, or give another file name"
        if exc.errno == errno.ENOTDIR:
            return "a part of its directory is not a directory", None
        if exc.errno == errno.ENAMETOOLONG:
            return _too_long(path), None
    target = _target(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        return "it is a directory", "give a file name"
    if not parent.is_dir() and target != path:  # only the directories of the path given are made
        return f"directory {_shown(parent)} does not exist (the symbolic link points into it)", \
            "create it first (mkdir -p DIR), or give another file name"
    existing, _ = missing_directories(parent)
    if not existing.is_dir():
        return f"{_shown(existing)} is a symbolic link to a directory that does not exist", \
            "create the directory it points to, or give another path"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"directory {_shown(existing)} is not writable", None
    if len(target.name.encode("utf-8", "surrogateescape")) > NAME_MAX:
        return f"the file name is over {NAME_MAX} bytes", None
    return None


def _too_long(path: Path) -> str:
    """Why the system calls ``path`` too long (ENAMETOOLONG)."""
    if len(path.name.encode("utf-8", "surrogateescape")) > NAME_MAX:
        return f"the file name is over {NAME_MAX} bytes"
    if any(len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in path.parent.parts):
        return f"a directory name in it is over {NAME_MAX} bytes"
    return "the path is longer than the system allows"


def missing_directories(directory: Path) -> tuple[Path, list[Path]]:
    """The nearest of ``directory`` and its parents that exists (or is a symbolic link, even to
    nothing), and the directories below it that writing a file into ``directory`` creates, the
    outermost first (``mkdir -p``)."""
    missing: list[Path] = []
    while not os.path.lexists(directory) and directory.parent != directory:
        missing.append(directory)
        directory = directory.parent
    return directory, missing[::-1]


def _make_directories(target: Path) -> list[Path]:
    """Create the missing directories above ``target`` (the usual umask, as ``mkdir -p``): the ones
    created, outermost first. One that cannot be made raises its OSError (its filename the directory)
    after the ones made before it are removed again."""
    existing, missing = missing_directories(target.parent if str(target.parent) else Path("."))
    if not existing.is_dir():
        raise KqplanError(f"cannot write {_shown(target)}: {_shown(existing)} is not a directory",
                          hint="choose another output path")
    made: list[Path] = []
    try:
        for directory in missing:
            try:
                directory.mkdir()
            except FileExistsError:
                if not directory.is_dir():
                    raise
                continue  # made meanwhile, by someone else: theirs
            made.append(directory)
    except BaseException:  # Ctrl-C between two as well: none of them is left behind
        _remove_directories(made)
        raise  # an OSError as any other failed write (its filename the directory), for the caller to word
    return made


def _remove_directories(made: list[Path]) -> None:
    """Remove the directories :func:`_make_directories` created (innermost first), if still empty."""
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            directory.rmdir()


def check_writable(path: Path, what: str) -> None:
    """Refuse an output path that cannot be written (``what`` names it), before any request: an
    apply must never end with its report lost. Directories of ``path`` that do not exist yet are
    no reason (the writer creates them, like ``terraform plan -out``), but nothing is created here:
    a command that fails before its output leaves no trace."""
    found = _unwritable(path)
    if found is not None:
        raise KqplanError(f"cannot write {what} {_shown(path)}: {found[0]}", hint=found[1])


def _new_mode(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _temp_prefix(name: str) -> str:
    """``.NAME.`` for a temporary sibling, the name cut (on a character boundary) to leave room
    for mkstemp's suffix within :data:`NAME_MAX` bytes."""
    raw = name.encode("utf-8", "surrogateescape")[: NAME_MAX - TEMP_NAME_ROOM]
    return "." + raw.decode("utf-8", "ignore") + "."


def _write_temp(path: Path, text: str | bytes) -> Path:
    """A fsynced temporary sibling of ``path`` holding ``text``, with the mode ``path`` has (or a
    new file gets)."""
    directory = path.parent if str(path.parent) else Path(".")
    mode = _new_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path.name), suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8") if isinstance(text, str) else text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _write_stream(path: Path, text: str | bytes) -> None:
    """Write to a FIFO, terminal or device in place (a FIFO nobody reads is an error, not a hang);
    to stdout or stderr through the process's own descriptor, after what was printed to it."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    std = _std_fd(path)
    if std is not None:
        import sys

        (sys.stdout if std == 1 else sys.stderr).flush()
        view = memoryview(data)
        while view:
            view = view[os.write(std, view):]
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise KqplanError(f"cannot write {_shown(path)}: {exc.strerror or exc}") from None
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _sync_directory(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_atomically(path: Path, text: str | bytes) -> None:
    """Replace ``path`` so that a crash leaves either the old or the new file, never a torn one.
    A symlink stays a symlink (its target is replaced); an existing file keeps its mode; a new one
    gets ``0666 & ~umask``, like any file the user creates."""
    write_all({path: text})


def write_all(files: Mapping[Path, str | bytes]) -> None:
    """Write every file, then rename each into place: a failure while writing (a full disk, a
    name too long) leaves none of them changed. Renames are each atomic; a crash between two of
    them leaves some files new and the others old, never a torn file."""
    streams = {path for path in files if _is_stream(path)}
    targets = {path: _target(path) for path in files if path not in streams}
    for path, target in targets.items():
        if target.is_dir():
            raise KqplanError(f"cannot write {_shown(target)}: a directory is in the way",
                              hint="move or remove that directory, or choose another output path")
        parent = target.parent if str(target.parent) else Path(".")
        if not parent.is_dir() and target != path:  # a symbolic link's directory is not made
            raise KqplanError(f"cannot write {_shown(target)}: directory {_shown(parent)} does not exist",
                              hint="create it first, or choose another output path")
    made: list[Path] = []
    written: list[tuple[Path, Path]] = []
    try:
        for target in targets.values():
            made += _make_directories(target)
        for path, target in targets.items():
            written.append((_write_temp(target, files[path]), target))
    except BaseException:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        _remove_directories(made)
        raise
    renamed = 0
    try:
        for tmp, target in written:
            os.replace(tmp, target)
            renamed += 1
    except BaseException:
        for tmp, _ in written[renamed:]:
            tmp.unlink(missing_ok=True)
        _remove_directories(made)  # those a renamed file is in are not empty: they stay
        raise
    for directory in {target.parent if str(target.parent) else Path(".") for _, target in written} | \
            {d.parent if str(d.parent) else Path(".") for d in made}:
        _sync_directory(directory)
    for path in streams:
        _write_stream(path, files[path])


def shown_path(path: Path) -> Path:
    """``path`` as it is opened and named in messages about opening it: relative to the current
    directory when it lies under it (an inventory layer, resolved against ``kqplan.toml``'s
    directory, is absolute), else unchanged — never ``../..``. Output that points into the
    repository (plans, diagnostics, annotations) uses :func:`display_path` instead."""
    if not path.is_absolute():
        return path
    try:
        return path.relative_to(Path.cwd())
    except (ValueError, OSError):  # outside the current directory, or the directory is gone
        return path


# -- paths as output shows them --------------------------------------------------------------------

_ROOT: list[Path | None] = [None]
"""The repository root manifest paths are shown from (:func:`set_display_root`); None: the
current directory."""
_ROOT_SET = [False]
"""Whether this command set :data:`_ROOT`; until it does, the first :func:`display_path` takes the
work tree of the current directory."""


def reset_display_root() -> None:
    """A new command in this process (the CLI's ``main``): its root is not known yet."""
    _ROOT_SET[0] = False


def repository_root(anchor: Path) -> Path | None:
    """The top of the git work tree that holds ``anchor`` (a directory with ``.git``, a directory
    or a worktree's file), or None."""
    here = Path(os.path.abspath(anchor))
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return None


def set_display_root(config_file: Path | None, start: Path | None = None) -> None:
    """Where output paths are shown from, for this command: the git work tree's top holding
    ``kqplan.toml`` (``config_file``), else its directory; without one, the work tree holding
    ``start`` (the first path given, else the current directory), else the current directory.
    So an annotation says ``teams/quotas.yaml`` — what GitHub attaches to the diff — from any
    directory, inside the repository or out."""
    try:
        anchor = config_file.parent if config_file is not None else start if start is not None else Path.cwd()
        root = repository_root(anchor)
        if root is None and config_file is not None:
            root = Path(os.path.abspath(config_file.parent))
        _ROOT[0] = Path(os.path.realpath(root)) if root is not None else None
    except OSError:  # the current directory is gone (a relative anchor cannot be placed)
        _ROOT[0] = None
    _ROOT_SET[0] = True


def display_path(path: Path | str) -> str:
    """``path`` as output shows it (plans, diagnostics, annotations, JSON): relative to the
    repository root (:func:`set_display_root`) when it lies under it, else absolute — never
    ``../..``, which would mean something else wherever the output is read. The path opened is
    never this one (it may not be relative to the current directory)."""
    given = Path(path)
    try:
        here = Path.cwd()
    except OSError:  # the current directory is gone
        return str(given)
    absolute = Path(os.path.normpath(given if given.is_absolute() else here / given))
    real = Path(os.path.realpath(absolute.parent)) / absolute.name
    if not _ROOT_SET[0]:
        set_display_root(None)
    root = _ROOT[0] or here
    for candidate in (absolute, real):
        try:
            return str(candidate.relative_to(root))
        except ValueError:
            continue
    return str(absolute)

