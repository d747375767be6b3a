"""Safe outputs: an output file is written whole or not at all, never over one of the command's inputs.

`check_output(path, inputs)` refuses (InputError, one line) an output path that

* resolves to one of `inputs` (the same file by device + inode when both exist, else the same resolved path):
  `sweep --profile p.json --out p.json` would destroy the profile it reads;
* exists and is not a regular file (a directory, a FIFO - opening one for writing blocks until a reader
  appears -, a device, a socket);
* lies in a directory that does not exist.

`atomic_path(path, inputs)` then yields a temporary path in the output's own directory (same file system, so
`os.replace` is atomic); when the block finishes the temporary file replaces `path` in one step, and when it
raises - a full disk, Ctrl-C - the temporary file is removed and `path` keeps its earlier contents. Two
concurrent writers to one path each write their own temporary file: the last replace wins, and the file is
always one writer's complete output. OSError becomes InputError naming the path.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import InputError

Pathish = str | os.PathLike


def resolve_path(path: Pathish, *, what: str = "") -> Path:
    """`Path(path).resolve()`; a symlink loop (RuntimeError before Python 3.13) is an InputError naming `path`."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise InputError(f"{what} {path}: symlink loop".strip()) from None


def _same_file(a: Path, b: Path, what: str = "") -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they resolve to
        return resolve_path(a, what=what) == resolve_path(b)


def check_output(path: Pathish, inputs: Iterable[Pathish | None] = (), *, what: str = "output") -> Path:
    """`path` as a Path after the checks of the module doc; InputError (one line) otherwise."""
    out = Path(path)
    for given in inputs:
        if given is None or str(given) in ("", "-"):
            continue
        if _same_file(out, Path(given), what):
            raise InputError(f"{what} {out}: is also an input of this command; write the output elsewhere")
    try:
        st = os.stat(out)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{what} {out}: {exc.strerror or exc}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
        raise InputError(f"{what} {out}: is {kind}")
    if not out.absolute().parent.is_dir():
        raise InputError(f"{what} {out}: directory {out.absolute().parent} does not exist")
    return out


@contextlib.contextmanager
def atomic_path(path: Pathish, inputs: Iterable[Pathish | None] = (), *, what: str = "output") -> Iterator[Path]:
    """A temporary path to write `path`'s contents to; moved onto `path` (os.replace) when the block succeeds."""
    out = check_output(path, inputs, what=what)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.absolute().parent)
    except OSError as exc:
        raise InputError(f"cannot write {what} {out}: {exc.strerror or exc}") from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if out.exists():  # keep the permissions of the file being replaced
            with contextlib.suppress(OSError):
                os.chmod(tmp, stat.S_IMODE(os.stat(out).st_mode))
        else:
            with contextlib.suppress(OSError):
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except OSError as exc:
        raise InputError(f"cannot write {what} {out}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text(path: Pathish, text: str, inputs: Iterable[Pathish | None] = (), *, what: str = "output") -> None:
    """`text` (UTF-8) to `path`, atomically (`atomic_path`)."""
    with atomic_path(path, inputs, what=what) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
