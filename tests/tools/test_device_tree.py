"""tools/device_tree.py on a small git repository: what travels (tracked, untracked not ignored,
carried), setting tracked paths aside and putting them back."""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("device_tree", REPO / "tools" / "device_tree.py")
device_tree = importlib.util.module_from_spec(spec)
spec.loader.exec_module(device_tree)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    def write(name: str, size: int) -> None:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * size)

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("/.whl/\n/.dev/\n")  # 14 bytes
    write("code.py", 100)
    write("data/corpus/a.txt", 1000)
    write("data/corpus/b.txt", 2000)
    write("models/one/model.bin", 500)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fixture"], cwd=tmp_path, check=True)
    write("notes.txt", 10)  # untracked, not ignored: travels
    write(".whl/pkg.whl", 300)  # ignored: travels only when carried
    return tmp_path


def test_what_travels_is_tracked_untracked_and_carried(repo):
    assert device_tree.size(repo, []) == 14 + 100 + 1000 + 2000 + 500 + 10
    assert device_tree.size(repo, [".whl"]) == 14 + 100 + 1000 + 2000 + 500 + 10 + 300


def test_set_aside_and_restore_round_trip(repo):
    assert device_tree.aside(repo, ["data/corpus", "models/one", "models/absent"]) == ["data/corpus", "models/one"]
    assert device_tree.size(repo, [".whl"]) == 14 + 100 + 10 + 300  # .dev/ is ignored: it does not travel
    assert (repo / ".dev/aside/data/corpus/b.txt").read_bytes() == b"x" * 2000
    assert device_tree.restore(repo) == ["data/corpus", "models/one"]
    assert (repo / "data/corpus/b.txt").read_bytes() == b"x" * 2000 and (repo / "models/one/model.bin").exists()
    assert not (repo / ".dev/aside/manifest.json").exists()
    assert device_tree.restore(repo) == []  # nothing left to restore
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status == "?? notes.txt\n"


def test_only_tracked_paths_are_set_aside_and_nothing_is_overwritten(repo):
    with pytest.raises(SystemExit, match="notes.txt is not tracked by git"):
        device_tree.aside(repo, ["notes.txt"])
    device_tree.aside(repo, ["models/one"])
    (repo / "models/one").mkdir()  # something new where the set-aside path was
    with pytest.raises(SystemExit, match="models/one exist"):
        device_tree.restore(repo)
    assert (repo / ".dev/aside/models/one/model.bin").exists()  # still set aside, not lost


def test_the_command_line_says_whether_it_fits(repo, capsys, monkeypatch):
    monkeypatch.setattr(device_tree, "LIMIT", 4000)
    assert device_tree.main(["size"], repo=repo) == 0
    assert device_tree.main(["size", "--carry", ".whl"], repo=repo) == 0  # 3,924 bytes
    monkeypatch.setattr(device_tree, "LIMIT", 3900)
    assert device_tree.main(["size", "--carry", ".whl"], repo=repo) == 1
    assert "would travel" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        device_tree.main(["size", "--carry", "nowhere"], repo=repo)
    assert "--carry: nowhere does not exist" in capsys.readouterr().err


def test_every_named_path_of_each_command_is_tracked_here():
    tracked = set(device_tree._git(REPO, "ls-files", "-z"))
    for command, paths in device_tree.UNUSED.items():
        for path in paths:
            assert path in tracked or any(name.startswith(path + "/") for name in tracked), (command, path)


def test_a_file_set_aside_and_restored_leaves_no_folder_that_blocks_its_parent_later(repo):
    assert device_tree.aside(repo, ["data/corpus/a.txt"]) == ["data/corpus/a.txt"]
    assert device_tree.restore(repo) == ["data/corpus/a.txt"]
    assert not (repo / ".dev" / "aside" / "data").exists()
    assert device_tree.aside(repo, ["data/corpus"]) == ["data/corpus"]
    assert device_tree.restore(repo) == ["data/corpus"]
    assert (repo / "data" / "corpus" / "a.txt").read_bytes() == b"x" * 1000
