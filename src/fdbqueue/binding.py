"""Opening a real FoundationDB cluster through the ``fdb`` binding, with an API version that works.

fdbqueue itself never selects an API version: the application does, once per process, with
``fdb.api_version(N)`` before ``fdb.open()``. This module is the helper the ``fdbqueue``
command line and the examples use for that step, and that applications may use too::

    from fdbqueue import binding

    db = binding.open_database()  # or open_database("/etc/foundationdb/fdb.cluster", 710)

Two version numbers must agree (see "Installing" in the documentation):

- the binding's *header version*: the newest API version the installed ``foundationdb`` pip
  package knows (630 for 6.3.x, 710 for 7.1.x, 730 for 7.3.x, 740 for 7.4.x, 800 for 8.0.x);
- the *maximum API version of libfdb_c*, the C client library installed by the
  ``foundationdb-clients`` package, which the binding loads with ``ctypes``.

``fdb.api_version(N)`` (``fdb/__init__.py`` of the binding) refuses ``N`` above the header
version, then passes ``N`` *and the header version* to libfdb_c's
``fdb_select_api_version_impl``, which fails with error 2203 (``api_version_not_supported``)
whenever the header version is above the library's maximum, whatever ``N`` is. So a binding
newer than libfdb_c cannot be used at all: install the binding series of your client library
(``pip install "fdbqueue[fdb71]"`` for FoundationDB 7.1), which :class:`BindingMismatchError`
spells out.

Nothing here imports ``fdb.impl`` (which loads libfdb_c) when this module is imported; only
:func:`choose_api_version`, :func:`select_api_version` and :func:`open_database` do, when
called. Everything works with bindings 6.3 to 8.0 and with :func:`fdbqueue.memory.install`
(the real binding over in-memory clusters).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import re
from typing import Any

from fdbqueue.errors import BindingMismatchError, ClientLibraryMissingError

__all__ = [
    "EXTRAS",
    "MIN_API_VERSION",
    "BindingMismatchError",
    "ClientLibraryMissingError",
    "binding_version",
    "choose_api_version",
    "client_library_version",
    "describe_fdb_error",
    "header_api_version",
    "install_hint",
    "open_database",
    "select_api_version",
]

#: The oldest API version fdbqueue supports (FoundationDB 6.3): everything it uses exists there.
MIN_API_VERSION = 630

#: The extras of the ``fdbqueue`` package that pin a binding series, by API version.
EXTRAS = {630: "fdb63", 710: "fdb71", 730: "fdb73", 740: "fdb74", 800: "fdb80"}

#: The message ``fdb.api_version(N)`` raises for ``N`` above the header version (``fdb/__init__.py``
#: of every binding from 6.3 to 8.0: "Latest known FDB API version is %d").
_LATEST_KNOWN = re.compile(r"Latest known FDB API version is (\d+)")
_PROBE_VERSION = 1_000_000  # above any header version, so api_version() refuses it at once


def binding_version() -> str | None:
    """The version of the installed ``foundationdb`` pip package, such as ``"7.1.67"``.

    Read from the package metadata (``importlib.metadata``), falling back to
    ``fdb.__version__``, which only bindings 7.4 and later define. None when neither is
    known (no binding installed, or one copied in without metadata). Never raises.
    """
    try:
        return importlib.metadata.version("foundationdb")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pass
    try:
        import fdb
    except ImportError:
        return None
    version = getattr(fdb, "__version__", None)
    return str(version) if version else None


def header_api_version() -> int:
    """The binding's header version: the newest API version the installed binding knows.

    Read, without loading libfdb_c, from the first of:

    1. ``fdb.LATEST_API_VERSION`` (bindings 7.3 and later, ``fdb/__init__.py``);
    2. ``fdb.apiversion.LATEST_API_VERSION`` (the module that defines it, 7.3 and later);
    3. the message of ``fdb.api_version(1000000)`` when no API version is selected yet:
       bindings 6.3 and 7.1 keep the header version in a local variable of ``api_version``
       and refuse a larger version with "Latest known FDB API version is N" before importing
       ``fdb.impl``, so this probe has no side effect;
    4. the binding's package version, as FoundationDB numbers API versions: major * 100 +
       minor * 10 (6.3.25 -> 630, 7.1.67 -> 710).

    Raises:
        RuntimeError: none of these is available (no recognisable ``fdb`` binding).
    """
    import fdb

    for holder in (fdb, _module("fdb.apiversion")):
        latest = getattr(holder, "LATEST_API_VERSION", None)
        if isinstance(latest, int):
            return latest
    if not _selected(fdb):
        try:
            fdb.api_version(_PROBE_VERSION)
        except RuntimeError as error:
            match = _LATEST_KNOWN.search(str(error))
            if match:
                return int(match.group(1))
        except Exception:
            pass
    version = binding_version()
    match = re.match(r"(\d+)\.(\d+)", version or "")
    if match:
        return int(match.group(1)) * 100 + int(match.group(2)) * 10
    raise RuntimeError(
        f"cannot tell which API versions the installed 'foundationdb' binding "
        f"(version {version or 'unknown'}) supports"
    )


def client_library_version() -> str | None:
    """libfdb_c's version (``"7.1.67"``), from ``fdb_get_client_version``; None if unknown.

    Loads libfdb_c (imports ``fdb.impl``) if the binding has not yet. The binding does not
    declare that C function's result type, so it is set to ``ctypes.c_char_p`` here; the
    library answers ``"7.1.67,<source hash>,<protocol version>"`` and the part before the
    first comma is returned. Never raises.
    """
    try:
        function = _client_library().fdb_get_client_version
        function.restype = ctypes.c_char_p
        raw = function()
    except Exception:
        return None
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", "replace")
    if not isinstance(raw, str) or not raw:
        return None
    return raw.split(",", 1)[0]


def install_hint(max_api_version: int) -> str:
    """The pip command that installs the binding series of a libfdb_c with this maximum.

    ``install_hint(710)`` is ``pip install "fdbqueue[fdb71]"`` (or, without fdbqueue's extra,
    ``pip install "foundationdb>=7.1,<7.2"``).
    """
    series = _series(max_api_version)
    major, minor = series
    pin = f'pip install "foundationdb>={major}.{minor},<{major}.{minor + 1}"'
    extra = EXTRAS.get(max_api_version)
    if extra is None:
        return pin
    return f'pip install "fdbqueue[{extra}]" (or {pin})'


def choose_api_version(requested: int | None = None) -> int:
    """The API version to pass to ``fdb.api_version()`` in this process.

    Args:
        requested: an explicit API version, or None to choose one.

    Returns:
        ``requested`` when given; otherwise, when the process has already selected an API
        version (``fdb.is_api_version_selected()``), that one (the binding refuses any other);
        otherwise ``min(header version, libfdb_c's maximum)``: the newest version both the
        binding (:func:`header_api_version`) and libfdb_c
        (``fdb.impl._capi.fdb_get_max_api_version()``) support.

    Raises:
        ValueError: ``requested`` is not an integer from :data:`MIN_API_VERSION` to the
            binding's header version (the message names both), or differs from the API
            version this process already selected.
        ClientLibraryMissingError: libfdb_c cannot be loaded (``import fdb.impl`` fails: the
            binding raises a bare ``Exception`` when it finds no library).
        BindingMismatchError: the binding's header version is above libfdb_c's maximum (then
            ``fdb.api_version`` fails with error 2203 whatever is passed), or libfdb_c is older
            than 6.3. The message gives libfdb_c's version and the pip command to run.

    Loads libfdb_c (``import fdb.impl``) unless an API version is already selected.
    """
    import fdb

    header = header_api_version()
    if requested is not None and (
        isinstance(requested, bool)
        or not isinstance(requested, int)
        or not MIN_API_VERSION <= requested <= header
    ):
        raise ValueError(
            f"API version {requested!r} is not supported: fdbqueue needs {MIN_API_VERSION} or "
            f"later, and the installed 'foundationdb' binding (version "
            f"{binding_version() or 'unknown'}) knows API versions up to {header}"
        )
    if _selected(fdb):
        selected = int(fdb.get_api_version())
        if requested is not None and requested != selected:
            raise ValueError(
                f"API version {selected} is already selected in this process; "
                f"fdb.api_version({requested}) cannot change it"
            )
        return selected
    maximum = _max_api_version()
    if maximum is not None and (header > maximum or maximum < MIN_API_VERSION):
        raise BindingMismatchError(_mismatch_message(header, maximum))
    if requested is not None:
        return requested
    return header if maximum is None else min(header, maximum)


def select_api_version(api_version: int | None = None) -> int:
    """Select the API version for this process, once; returns the version in effect.

    An API version already selected (by an earlier call, or by the application's own
    ``fdb.api_version()``) is kept. Otherwise ``fdb.api_version(choose_api_version(...))``.

    Raises:
        ValueError, ClientLibraryMissingError, BindingMismatchError: as
            :func:`choose_api_version`; BindingMismatchError also when ``fdb.api_version``
            itself refuses the chosen version (its RuntimeError is chained).
    """
    import fdb

    version = choose_api_version(api_version)
    if _selected(fdb):
        return version
    try:
        fdb.api_version(version)
    except RuntimeError as error:
        raise BindingMismatchError(
            f"fdb.api_version({version}) failed: {error} (binding "
            f"{binding_version() or 'unknown'}, libfdb_c "
            f"{client_library_version() or 'unknown'})"
        ) from error
    return version


def open_database(cluster_file: str | None = None, api_version: int | None = None) -> Any:
    """``fdb.open(cluster_file)`` after :func:`select_api_version`; a real ``fdb`` Database.

    Args:
        cluster_file: the cluster file; None for the default one (``FDB_CLUSTER_FILE``, else
            the platform's default, such as ``/etc/foundationdb/fdb.cluster``).
        api_version: the API version to select, or None to choose one (:func:`choose_api_version`);
            ignored when the process already selected the same one.

    Raises:
        ValueError, ClientLibraryMissingError, BindingMismatchError: see
            :func:`choose_api_version`.
        fdb.FDBError: the binding cannot open the cluster file (with bindings 7.x most
            problems with the file only show at the first transaction instead).
    """
    import fdb

    select_api_version(api_version)
    return fdb.open(cluster_file) if cluster_file else fdb.open()


def describe_fdb_error(error: BaseException) -> str:
    """``"<description> (<code>)"`` as text, for FoundationDB errors of either backend.

    The real binding's ``FDBError.description`` is the ``bytes`` that libfdb_c's
    ``fdb_get_error`` returns (``restype`` ``c_char_p`` in ``fdb/impl.py``), so
    ``str(error)`` reads ``b'Operation aborted ...' (1031)``; this decodes it.
    :class:`fdbqueue.memory.FDBError` already has a ``str`` description. Errors without a
    ``code`` give ``str(error)``. Never raises.
    """
    code = getattr(error, "code", None)
    try:
        description: Any = getattr(error, "description", None)
    except Exception:  # the real property asks libfdb_c
        description = None
    if isinstance(description, (bytes, bytearray)):
        description = bytes(description).decode("utf-8", "replace")
    if not isinstance(description, str) or not description:
        try:
            return str(error)
        except Exception:
            return repr(error)
    return description if code is None else f"{description} ({code})"


# -- internals --------------------------------------------------------------------------------


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _selected(fdb: Any) -> bool:
    check = getattr(fdb, "is_api_version_selected", None)
    return bool(check()) if callable(check) else False


def _client_library() -> Any:
    """``fdb.impl._capi``, importing ``fdb.impl`` (which loads libfdb_c) if needed."""
    try:
        impl = importlib.import_module("fdb.impl")
    except Exception as error:  # the binding raises a bare Exception when libfdb_c is missing
        raise ClientLibraryMissingError(
            f"the FoundationDB client library could not be loaded ({error}); install the "
            "foundationdb-clients package of your cluster's FoundationDB version, which "
            "provides libfdb_c (or use fdbqueue.memory, the in-memory database)"
        ) from error
    return impl._capi  # the binding's loaded libfdb_c: it has no public name for it


def _max_api_version() -> int | None:
    """libfdb_c's ``fdb_get_max_api_version()``; None if the library does not answer it."""
    library = _client_library()
    try:
        return int(library.fdb_get_max_api_version())
    except Exception:
        return None


def _series(api_version: int) -> tuple[int, int]:
    return api_version // 100, api_version % 100 // 10


def _mismatch_message(header: int, maximum: int) -> str:
    library = client_library_version()
    major, minor = _series(header)
    installed = f"'foundationdb' binding {binding_version() or f'{major}.{minor}.x'}"
    client = f"libfdb_c {library}" if library else "the installed libfdb_c"
    if maximum < MIN_API_VERSION:
        return (
            f"{client} supports API versions up to {maximum}; fdbqueue needs FoundationDB 6.3 "
            f"or later: upgrade the foundationdb-clients package (the {installed} needs API "
            f"version {header})"
        )
    return (
        f"the {installed} is newer than {client}: the binding needs a client library that "
        f"supports API version {header}, and this one supports at most {maximum}, so "
        f"fdb.api_version() fails with error 2203 whatever version is asked for. Install "
        f"the binding series of your client library: {install_hint(maximum)}"
    )
