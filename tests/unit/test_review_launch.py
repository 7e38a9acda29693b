"""semula.review_web.launch: the private launch page and the sweep of the folders a killed server left.
The sweep runs at every `review web` start in the shared temp dir, so it must touch nothing but this
user's own folders of dead servers: not a symlink, not a file, not another user's, not a live server's."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from semula.review_web.launch import PREFIX, LaunchPage, sweep


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_page_is_private_and_redirects_without_the_token_on_a_command_line(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8123/#token=abc</script><script>alert(1)</script>"
    page = LaunchPage(url, str(tmp_path))
    try:
        assert page.folder.name.startswith(f"{PREFIX}{os.getpid()}-")
        assert stat.S_IMODE(page.folder.stat().st_mode) == 0o700 and stat.S_IMODE(page.page.stat().st_mode) == 0o600
        text = page.page.read_text()
        assert text.count("</script>") == 1 and "<script>alert" not in text, text
    finally:
        page.remove()
    assert not page.folder.exists()
    page.remove()  # twice is fine (the server's first use and its stop both call it)


def test_the_sweep_removes_only_this_users_folders_of_dead_servers(tmp_path: Path) -> None:
    dead, live = dead_pid(), os.getppid()
    stale = tmp_path / f"{PREFIX}{dead}-abc"
    stale.mkdir()
    (stale / "open.html").write_text("x")
    running = tmp_path / f"{PREFIX}{live}-abc"
    running.mkdir()
    ours = tmp_path / f"{PREFIX}{os.getpid()}-abc"
    ours.mkdir()
    theirs = tmp_path / f"{PREFIX}{dead}-theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534) if os.getuid() == 0 else None
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep").write_text("x")
    link = tmp_path / f"{PREFIX}{dead}-link"
    link.symlink_to(target, target_is_directory=True)
    a_file = tmp_path / f"{PREFIX}{dead}-file"
    a_file.write_text("x")
    unrelated = tmp_path / f"{PREFIX}notapid-abc"
    unrelated.mkdir()

    removed = sweep(str(tmp_path))

    assert removed == [stale] and not stale.exists()
    assert running.exists() and ours.exists() and link.is_symlink() and (target / "keep").exists()
    assert a_file.exists() and unrelated.exists()
    assert theirs.exists() or os.getuid() != 0


def test_a_missing_temp_dir_is_no_error(tmp_path: Path) -> None:
    assert sweep(str(tmp_path / "absent")) == []
