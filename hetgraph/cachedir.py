"""hetgraph's cache directory, where it keeps what it can derive again: compiled CPU
passes (:mod:`hetgraph.kernels.cpu.diskcache`) and the bundled graphs' parsed arrays
(:mod:`hetgraph.datasets`).

Where: ``$HETGRAPH_CACHE`` (``off``: no cache), else ``$XDG_CACHE_HOME/hetgraph``, else
``~/.cache/hetgraph``: a directory of the user's own, made private (mode 0700). A file
is read back only when it is a regular file owned by the user that no one else can
write, and its HMAC-SHA256 signature by the cache's key holds (32 random bytes in a
private file of that directory, made on first use): a corrupt, truncated, foreign or
renamed file reads as missing, and its owner derives it again.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import stat
import tempfile
import warnings

log = logging.getLogger("hetgraph.cache")

_MAGIC = b"hetgraph-cache-1\n"
_KEY_BYTES = 32
_MAC_BYTES = hashlib.sha256().digest_size
_OFF = "off"


def cache_directory():
    """The cache directory (see the module docstring), or None when
    ``$HETGRAPH_CACHE`` is ``off``."""
    given = os.environ.get("HETGRAPH_CACHE")
    if given:
        return None if given.strip().lower() == _OFF else os.path.abspath(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                           ".cache")
    return os.path.join(base, "hetgraph")


class PrivateStore:
    """One cache directory, checked: the user's own, mode 0700, with its signing key.
    Raises OSError (PermissionError) when the directory cannot be used."""

    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
        if not stat.S_ISDIR(info.st_mode) or not _owned(info):
            raise PermissionError(f"{directory} is not a directory of this user's")
        if stat.S_IMODE(info.st_mode) & 0o077:  # ours: made private, as documented
            os.chmod(directory, 0o700)
        self.key = self._key()

    def _key(self) -> bytes:
        """The signing key: read, or made once (linked into place, so that processes
        starting together agree on one)."""
        path = os.path.join(self.directory, "key")
        key = _read_private(path)
        if key is None:
            self._write(path, os.urandom(_KEY_BYTES), replace=False)
            key = _read_private(path)
        if key is None or len(key) != _KEY_BYTES:
            raise PermissionError(f"{path} is not a private key file of this user's")
        return key

    def _write(self, path, data, replace=True):
        """Write ``data`` to ``path`` through a private temporary file: a file appears
        whole or not at all; ``replace``: over an existing one."""
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if replace:
                os.replace(temporary, path)
            else:
                try:
                    os.link(temporary, path)
                except FileExistsError:
                    pass
        finally:
            if not replace or os.path.exists(temporary):
                _remove(temporary)

    def path(self, name):
        """The path of file ``name`` (a plain file name) in the store."""
        return os.path.join(self.directory, name)

    def load(self, name):
        """The payload of file ``name``, or None (missing, or failing a check)."""
        data = _read_private(self.path(name))
        if data is None or not data.startswith(_MAGIC):
            return None
        mac = data[len(_MAGIC):len(_MAGIC) + _MAC_BYTES]
        payload = data[len(_MAGIC) + _MAC_BYTES:]
        if not hmac.compare_digest(mac, self._sign(name, payload)):
            log.warning("hetgraph cache: %s fails its signature; ignored", self.path(name))
            return None
        return payload

    def save(self, name, payload: bytes):
        """Write file ``name`` (replacing it), signed; raises OSError (a full disk)."""
        self._write(self.path(name), _MAGIC + self._sign(name, payload) + payload)

    def _sign(self, name, payload):
        return hmac.new(self.key, name.encode() + b"\0" + payload, hashlib.sha256).digest()


def _owned(info) -> bool:
    """Whether a file is the user's own (where the system has owners)."""
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def _read_private(path):
    """The bytes of ``path`` when it is a regular file of the user's that no one else
    can write, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or not _owned(info) or \
                (hasattr(os, "getuid") and info.st_mode & 0o022):
            log.warning("hetgraph cache: %s is not a private file of this user's; "
                        "ignored", path)
            return None
        return f.read()


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def private_store():
    """The checked store of :func:`cache_directory`, or None when the cache is off or
    its directory cannot be used (warned once a process: everything is then derived
    again in each process, as without a cache)."""
    directory = cache_directory()
    return None if directory is None else _store(directory)


@functools.lru_cache(maxsize=4)
def _store(directory):
    try:
        return PrivateStore(directory)
    except OSError as exc:
        warnings.warn(f"hetgraph's cache is off in this process: {exc} (set "
                      f"HETGRAPH_CACHE to a directory of your own, or to off)",
                      RuntimeWarning, stacklevel=3)
        return None
