"""``read_confined``: the one reader of files that may come from strangers (pool policies, discovery checkpoints):
confined to a folder, regular, size-capped, and hashed from the bytes it returns."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from ers_exact.util import files
from ers_exact.util.errors import InputError
from ers_exact.util.files import FileRefusedError, file_sha256, read_confined

needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs, /dev/zero")
DATA = bytes(range(256)) * 3


class Refused(ValueError):
    """A caller's own error type (ers-deep's CheckpointError, ers-exact's ArtifactError)."""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "pool" / "policies").mkdir(parents=True)
    (tmp_path / "pool" / "policies" / "a.bin").write_bytes(DATA)
    (tmp_path / "outside.bin").write_bytes(DATA)
    return tmp_path / "pool"


def test_a_file_inside_the_folder_is_read_once_with_its_digest_checked(folder: Path) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    assert file_sha256(folder / "policies" / "a.bin") == sha
    path, data = read_confined("policies/a.bin", "a file", folder=folder, sha256=sha)
    assert (path, data) == (folder / "policies" / "a.bin", DATA)
    assert read_confined(folder / "policies" / "a.bin", "a file") == (path, DATA)  # no folder: anywhere
    with pytest.raises(Refused, match=r"a\.bin: SHA-256 differs from the one recorded in pool\.json"):
        read_confined(
            "policies/a.bin", "a file", folder=folder, sha256="0" * 64, record="pool.json", error=Refused
        )
    with pytest.raises(FileRefusedError, match="recorded for a file"):
        read_confined("policies/a.bin", "a file", folder=folder, sha256="0" * 64)
    assert issubclass(FileRefusedError, InputError) and issubclass(FileRefusedError, ValueError)


@pytest.mark.parametrize("name", ["", ".", "../outside.bin", "policies/../../outside.bin", "ABSOLUTE"])
def test_a_name_that_is_no_path_inside_the_folder_is_refused(folder: Path, name: str) -> None:
    name = str(folder.parent / "outside.bin") if name == "ABSOLUTE" else name
    with pytest.raises(Refused, match="no file inside") as err:
        read_confined(name, "a policy file", folder=folder, record="pool.json", error=Refused)
    assert str(err.value).startswith(f"pool.json: a policy file {name!r}")


def test_a_link_leading_out_of_the_folder_is_refused(folder: Path) -> None:
    (folder / "out.bin").symlink_to(folder.parent / "outside.bin")
    (folder / "loop").symlink_to(folder / "loop")
    (folder / "in.bin").symlink_to(folder / "policies" / "a.bin")
    for name in ("out.bin", "loop"):
        with pytest.raises(Refused, match="leads out of"):
            read_confined(name, "a file", folder=folder, error=Refused)
    assert read_confined("in.bin", "a file", folder=folder)[1] == DATA  # a link inside it is followed


def test_a_missing_folder_or_too_large_file_is_refused(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Refused, match=r"missing\.bin: cannot read a file: not found"):
        read_confined("missing.bin", "a file", folder=folder, error=Refused)
    with pytest.raises(Refused, match=r"not a regular file \(a folder\), so not a file"):
        read_confined("policies", "a file", folder=folder, error=Refused)
    with pytest.raises(Refused, match="larger than 100 bytes"):
        read_confined("policies/a.bin", "a file", folder=folder, error=Refused, limit=100)
    monkeypatch.setattr(files, "MAX_FILE_BYTES", len(DATA) - 1)  # the default limit, read at each call
    with pytest.raises(FileRefusedError, match=f"larger than {len(DATA) - 1} bytes"):
        read_confined("policies/a.bin", "a file", folder=folder)


@needs_linux
def test_a_device_or_fifo_is_refused_without_reading_or_waiting(folder: Path) -> None:
    os.mkfifo(folder / "fifo")  # no writer: a blocking open would wait forever
    with pytest.raises(Refused, match=r"not a regular file \(a device, FIFO or socket\)"):
        read_confined("fifo", "a file", folder=folder, error=Refused)
    with pytest.raises(Refused, match="/dev/zero: not a regular file"):
        read_confined("/dev/zero", "a file", error=Refused)


def test_a_file_that_grows_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader takes the size the file had when opened and refuses one with more bytes behind it (written to
    while read): emulated by an ``fstat`` that reports one byte fewer than the file holds. (Without the check
    the file was read cut short and accepted: a mutation run, 2026-12-08.)"""
    path = tmp_path / "policy.bin"
    path.write_bytes(b"0123456789")
    real = os.fstat

    def stale(fd: int) -> os.stat_result:
        st = list(real(fd))
        st[6] -= 1  # st_size
        return os.stat_result(st)

    monkeypatch.setattr(files.os, "fstat", stale)
    with pytest.raises(FileRefusedError, match="grew while it was read"):
        read_confined(path, "a policy")
    monkeypatch.undo()
    assert read_confined(path, "a policy")[1] == b"0123456789"
