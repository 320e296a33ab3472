"""fdbqueue.binding: the binding's version, the API version choice, opening a cluster, and error
text, against fake ``fdb`` / ``fdb.impl`` modules (no libfdb_c needed), plus one run of the
real binding over ``fdbqueue.memory.install()`` in a child process."""

from __future__ import annotations

import configparser
import ctypes
import importlib.metadata
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from helpers import BytesDescriptionError

from fdbqueue import binding, memory

SRC_DIR = Path(__file__).resolve().parent.parent / "src"


class FakeFunction:
    """A C function of the fake libfdb_c: callable, with a settable ``restype``."""

    def __init__(self, result):
        self.result = result
        self.restype = None

    def __call__(self):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


class FakeCapi:
    def __init__(self, maximum=730, version=b"7.3.79,hash,fdb00b073000000"):
        self.fdb_get_max_api_version = FakeFunction(maximum)
        self.fdb_get_client_version = FakeFunction(version)


class FakeFdb(types.ModuleType):
    """What ``import fdb`` gives: a header version, api_version selection and open()."""

    def __init__(self, header=730, path=None):
        super().__init__("fdb")
        if header is not None:
            self.LATEST_API_VERSION = header
        self.__path__ = [str(path)] if path else []
        self.selected = None
        self.api_version_calls = []
        self.opened = []

    def is_api_version_selected(self):
        return self.selected is not None

    def get_api_version(self):
        if self.selected is None:
            raise RuntimeError("API version is not set")
        return self.selected

    def api_version(self, version):
        self.api_version_calls.append(version)
        self.selected = version

    def open(self, cluster_file=None):
        self.opened.append(cluster_file)
        return ("database", cluster_file)


@pytest.fixture
def fake(monkeypatch):
    """Install a fake ``fdb`` (header 730) and ``fdb.impl`` (libfdb_c maximum 730)."""

    def make(header=730, maximum=730, version=b"7.3.79,hash,fdb00b073000000"):
        fdb = FakeFdb(header)
        impl = types.ModuleType("fdb.impl")
        impl._capi = FakeCapi(maximum, version)
        monkeypatch.setitem(sys.modules, "fdb", fdb)
        monkeypatch.setitem(sys.modules, "fdb.impl", impl)
        monkeypatch.delitem(sys.modules, "fdb.apiversion", raising=False)
        fdb.impl = impl
        return fdb

    return make


@pytest.fixture
def no_libfdb_c(monkeypatch, tmp_path):
    """A fake ``fdb`` whose ``fdb.impl`` raises the bare Exception the binding raises."""
    package = tmp_path / "fakefdb"
    package.mkdir()
    (package / "impl.py").write_text(
        'raise Exception("Unable to locate the FoundationDB API shared library!")\n'
    )
    fdb = FakeFdb(730, path=package)
    monkeypatch.setitem(sys.modules, "fdb", fdb)
    monkeypatch.delitem(sys.modules, "fdb.impl", raising=False)
    monkeypatch.delitem(sys.modules, "fdb.apiversion", raising=False)
    return fdb


def metadata_version(monkeypatch, value):
    def version(name):
        assert name == "foundationdb"
        if value is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return value

    monkeypatch.setattr(importlib.metadata, "version", version)


# -- binding_version ---------------------------------------------------------------------------


def test_binding_version_reads_the_package_metadata(monkeypatch, fake):
    fdb = fake()
    fdb.__version__ = "0.0.0-not-this"
    metadata_version(monkeypatch, "7.1.67")
    assert binding.binding_version() == "7.1.67"


def test_binding_version_falls_back_to_fdb_version_then_none(monkeypatch, fake):
    fdb = fake()
    metadata_version(monkeypatch, None)
    assert binding.binding_version() is None, "before 7.4 there is no fdb.__version__"
    fdb.__version__ = "7.4.8"
    assert binding.binding_version() == "7.4.8"


def test_binding_version_of_the_installed_binding_matches_pip():
    assert binding.binding_version() == importlib.metadata.version("foundationdb")


# -- header_api_version ------------------------------------------------------------------------


def test_header_version_from_fdb_latest_api_version(fake):
    fake(header=740)
    assert binding.header_api_version() == 740


def test_header_version_from_the_apiversion_module(fake, monkeypatch):
    fake(header=None)
    module = types.ModuleType("fdb.apiversion")
    module.LATEST_API_VERSION = 730
    monkeypatch.setitem(sys.modules, "fdb.apiversion", module)
    assert binding.header_api_version() == 730


def test_header_version_probed_from_api_version_message_as_in_6_3_and_7_1(fake, monkeypatch):
    fdb = fake(header=None)
    metadata_version(monkeypatch, "9.9.9")  # would give 990: the probe must come first
    probes = []

    def api_version(version):  # fdb/__init__.py of 6.3.25 and 7.1.67
        probes.append(version)
        if version > 630:
            raise RuntimeError(f"Latest known FDB API version is {630}")
        fdb.selected = version

    fdb.api_version = api_version
    assert binding.header_api_version() == 630
    assert not fdb.is_api_version_selected(), "the probe selects nothing"
    assert probes and probes[0] > 10_000


def test_header_version_from_the_package_version_when_nothing_else_tells(fake, monkeypatch):
    fdb = fake(header=None)
    fdb.selected = 630  # no probe once selected
    metadata_version(monkeypatch, "7.1.67")
    assert binding.header_api_version() == 710
    metadata_version(monkeypatch, None)
    with pytest.raises(RuntimeError, match="cannot tell which API versions"):
        binding.header_api_version()


@pytest.mark.parametrize(
    ("version", "header"), [("6.3.25", 630), ("7.1.67", 710), ("7.3.79", 730), ("8.0.0", 800)]
)
def test_header_version_convention(fake, monkeypatch, version, header):
    fdb = fake(header=None)
    fdb.selected = 630
    metadata_version(monkeypatch, version)
    assert binding.header_api_version() == header


def test_header_version_of_the_installed_binding():
    import fdb

    header = binding.header_api_version()
    major, minor = (int(part) for part in binding.binding_version().split(".")[:2])
    assert header == major * 100 + minor * 10
    assert getattr(fdb, "LATEST_API_VERSION", header) == header


# -- choose_api_version ------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "maximum", "chosen"), [(730, 730, 730), (710, 800, 710)])
def test_choose_takes_the_newest_version_both_support(fake, header, maximum, chosen):
    fake(header=header, maximum=maximum)
    assert binding.choose_api_version() == chosen


@pytest.mark.parametrize("requested", [630, 700, 730])
def test_choose_returns_a_requested_version_within_range(fake, requested):
    fake(header=730)
    assert binding.choose_api_version(requested) == requested


@pytest.mark.parametrize("requested", [620, 740, 0, -1, True, 710.0, "710"])
def test_choose_rejects_versions_outside_630_to_the_header(fake, monkeypatch, requested):
    fake(header=730)
    metadata_version(monkeypatch, "7.3.79")
    with pytest.raises(ValueError) as info:
        binding.choose_api_version(requested)
    message = str(info.value)
    assert repr(requested) in message and "630" in message and "730" in message
    assert "7.3.79" in message


def test_binding_newer_than_libfdb_c_is_a_mismatch_with_what_to_install(fake, monkeypatch):
    fdb = fake(header=800, maximum=710, version=b"7.1.67,9a8b7c,fdb00b071010000")
    metadata_version(monkeypatch, "8.0.0")
    with pytest.raises(binding.BindingMismatchError) as info:
        binding.choose_api_version(710)  # refused whatever is requested: 2203
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "'foundationdb' binding 8.0.0 is newer than libfdb_c 7.1.67" in message
    assert "800" in message and "710" in message and "2203" in message
    assert 'pip install "fdbqueue[fdb71]" (or pip install "foundationdb>=7.1,<7.2")' in message
    assert fdb.impl._capi.fdb_get_client_version.restype is ctypes.c_char_p
    assert fdb.api_version_calls == []


def test_mismatch_without_an_extra_for_the_series_gives_the_pin(fake):
    fake(header=730, maximum=720, version=b"")
    with pytest.raises(binding.BindingMismatchError) as info:
        binding.choose_api_version()
    message = str(info.value)
    assert "the installed libfdb_c" in message, "no version string: still a sentence"
    assert 'pip install "foundationdb>=7.2,<7.3"' in message
    assert "fdbqueue[" not in message


def test_libfdb_c_older_than_6_3_is_a_mismatch_asking_for_an_upgrade(fake):
    fake(header=630, maximum=620, version=b"6.2.30,x,y")
    with pytest.raises(binding.BindingMismatchError, match=r"libfdb_c 6\.2\.30.*6\.3 or later"):
        binding.choose_api_version()


def test_missing_libfdb_c_is_client_library_missing(no_libfdb_c):
    with pytest.raises(binding.ClientLibraryMissingError) as info:
        binding.choose_api_version()
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "Unable to locate the FoundationDB API shared library" in message
    assert "foundationdb-clients" in message and "fdbqueue.memory" in message


def test_unknown_maximum_falls_back_to_the_header(fake):
    fdb = fake(header=730)
    fdb.impl._capi.fdb_get_max_api_version = FakeFunction(OSError("no such symbol"))
    assert binding.choose_api_version() == 730


def test_an_already_selected_version_is_returned_and_libfdb_c_not_asked(fake):
    fdb = fake(header=730, maximum=0)  # would be a mismatch if asked
    fdb.selected = 710
    assert binding.choose_api_version() == 710
    assert binding.choose_api_version(710) == 710
    with pytest.raises(ValueError, match=r"710 is already selected.*fdb.api_version\(630\)"):
        binding.choose_api_version(630)


# -- client_library_version, install_hint ------------------------------------------------------


def test_client_library_version_is_guarded(fake):
    fdb = fake()
    assert binding.client_library_version() == "7.3.79"
    fdb.impl._capi.fdb_get_client_version = FakeFunction(OSError("boom"))
    assert binding.client_library_version() is None
    del fdb.impl._capi.fdb_get_client_version
    assert binding.client_library_version() is None


def test_client_library_version_without_libfdb_c_is_none(no_libfdb_c):
    assert binding.client_library_version() is None


@pytest.mark.parametrize(
    ("maximum", "hint"),
    [
        (630, 'pip install "fdbqueue[fdb63]" (or pip install "foundationdb>=6.3,<6.4")'),
        (710, 'pip install "fdbqueue[fdb71]" (or pip install "foundationdb>=7.1,<7.2")'),
        (730, 'pip install "fdbqueue[fdb73]" (or pip install "foundationdb>=7.3,<7.4")'),
        (740, 'pip install "fdbqueue[fdb74]" (or pip install "foundationdb>=7.4,<7.5")'),
        (800, 'pip install "fdbqueue[fdb80]" (or pip install "foundationdb>=8.0,<8.1")'),
        (700, 'pip install "foundationdb>=7.0,<7.1"'),
    ],
)
def test_install_hint(maximum, hint):
    assert binding.install_hint(maximum) == hint


def test_the_extras_named_exist_in_pyproject():
    pyproject = SRC_DIR.parent / "pyproject.toml"
    if not pyproject.exists():
        pytest.skip("not run from a source tree")
    text = pyproject.read_text()
    for api_version, extra in binding.EXTRAS.items():
        major, minor = api_version // 100, api_version % 100 // 10
        assert f'{extra} = ["foundationdb>={major}.{minor},<{major}.{minor + 1}"]' in text


def test_every_binding_extra_has_a_tox_environment():
    """``tox -e fdbNN`` runs the suite on each binding series the extras offer."""
    tox_ini = SRC_DIR.parent / "tox.ini"
    if not tox_ini.exists():
        pytest.skip("not run from a source tree")
    config = configparser.ConfigParser()
    config.read(tox_ini)
    envlist = {name.strip() for name in config["tox"]["envlist"].split(",")}
    extras = config["testenv"]["extras"]
    for extra in sorted(set(binding.EXTRAS.values())):
        assert extra in envlist, f"tox.ini's envlist has no {extra}"
        assert f"{extra}: {extra}" in extras, f"tox.ini's {extra} does not install its extra"


# -- select_api_version, open_database ---------------------------------------------------------


def test_open_database_selects_once_then_opens(fake):
    fdb = fake(header=730, maximum=800)
    assert binding.open_database("/etc/fdb.cluster") == ("database", "/etc/fdb.cluster")
    assert binding.open_database() == ("database", None)
    assert fdb.api_version_calls == [730], "selected once per process"
    assert fdb.opened == ["/etc/fdb.cluster", None]


def test_open_database_with_an_explicit_api_version(fake):
    fdb = fake(header=730)
    binding.open_database("c", api_version=630)
    assert fdb.api_version_calls == [630]
    with pytest.raises(ValueError, match="already selected"):
        binding.open_database("c", api_version=710)
    binding.open_database("c", api_version=630)
    assert fdb.api_version_calls == [630]


def test_open_database_keeps_a_version_the_application_selected(fake):
    fdb = fake(header=730)
    fdb.selected = 700
    binding.open_database("c")
    assert fdb.api_version_calls == [] and fdb.opened == ["c"]


def test_open_database_reports_api_version_refusals_as_mismatch(fake):
    fdb = fake(header=730)

    def refuse(version):
        raise RuntimeError("FoundationDB API error")

    fdb.api_version = refuse
    with pytest.raises(binding.BindingMismatchError, match=r"fdb.api_version\(730\) failed"):
        binding.open_database("c")
    assert fdb.opened == []


def test_open_database_without_libfdb_c(no_libfdb_c):
    with pytest.raises(binding.ClientLibraryMissingError):
        binding.open_database("c")
    assert no_libfdb_c.opened == [] and no_libfdb_c.api_version_calls == []


# -- describe_fdb_error ------------------------------------------------------------------------


def test_describe_decodes_the_real_bindings_bytes_description():
    error = BytesDescriptionError(1031, b"Operation aborted because the transaction timed out")
    assert str(error).startswith("b'")
    assert binding.describe_fdb_error(error) == (
        "Operation aborted because the transaction timed out (1031)"
    )


def test_describe_memory_errors_and_others():
    assert binding.describe_fdb_error(memory.FDBError(1020)) == (
        "Transaction not committed due to conflict with another transaction (1020)"
    )
    assert binding.describe_fdb_error(ValueError("plain")) == "plain"
    assert binding.describe_fdb_error(BytesDescriptionError(2000, b"")) == "b'' (2000)"

    class Unreadable(Exception):
        code = 1

        @property
        def description(self):
            raise OSError("libfdb_c gone")

    assert binding.describe_fdb_error(Unreadable("x")) == "x"


# -- the real binding ----------------------------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={"PYTHONPATH": str(SRC_DIR), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_importing_binding_loads_no_client_library():
    done = run_python(
        """
        import sys
        import fdbqueue.binding
        assert "fdb.impl" not in sys.modules, sorted(m for m in sys.modules if "fdb" in m)
        print("ok")
        """
    )
    assert done.stdout.strip() == "ok", done.stdout + done.stderr


def test_real_binding_over_memory_install_chooses_the_header_and_decodes_errors():
    done = run_python(
        """
        import fdb
        from fdbqueue import binding, memory
        memory.install()
        header = binding.header_api_version()
        assert binding.choose_api_version() == header, header
        db = binding.open_database("memory.cluster")
        assert fdb.get_api_version() == header
        db[b"k"] = b"v"
        assert db[b"k"] == b"v"
        assert binding.open_database("memory.cluster") is not None  # kept, not re-selected
        error = fdb.FDBError(1031)
        assert isinstance(error.description, bytes), type(error.description)
        print(binding.describe_fdb_error(error))
        """
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "Operation aborted because the transaction timed out (1031)"
