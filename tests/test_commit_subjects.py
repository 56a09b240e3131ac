"""`.ci/commit-subjects` (run by `make lint`) against throwaway repositories in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "commit-subjects"
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,  # no signing, hooks or templates of the machine's user
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.org",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.org",
}
OLD_LONG = "An old subject from before the rule, which ran on well past seventy-two characters"
AT_LIMIT = "x" * 72
WIDE_AT_LIMIT = "Ünïcödé " + "é" * 64  # 72 characters, more bytes: characters count
LONG = "A new subject after the baseline that is one character too long for the r"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def _commit(repo: Path, subject: str, body: str = "") -> str:
    message = ["-m", subject, *(["-m", body] if body else [])]
    _git(repo, "commit", "--allow-empty", "--quiet", *message)
    return _git(repo, "rev-parse", "HEAD")


def _run(*args: str | Path, script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *map(str, args)],
        env=GIT_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a long subject before its baseline (the commit tagged `baseline`)."""
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "--quiet", "-b", "main")
    _commit(path, OLD_LONG)
    _commit(path, "The baseline")
    _git(path, "tag", "baseline")
    return path


def test_subjects_at_the_limit_pass_and_older_history_is_left_alone(repo: Path) -> None:
    assert len(OLD_LONG) > 72 and len(WIDE_AT_LIMIT) == 72 < len(WIDE_AT_LIMIT.encode())
    _commit(repo, AT_LIMIT, body="A body line may be as long as it needs to be, " * 4)
    _commit(repo, WIDE_AT_LIMIT)
    done = _run("--baseline", "baseline", "--repo", repo)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_each_long_subject_after_the_baseline_is_named_with_its_hash_and_length(
    repo: Path,
) -> None:
    assert len(LONG) == 73
    long_commit = _commit(repo, LONG)
    _commit(repo, "A short one in between")
    longer_commit = _commit(repo, LONG + " and on")
    done = _run("--baseline", "baseline", "--repo", repo)
    assert done.returncode == 1
    named = [line.split(" ", 2) for line in done.stdout.splitlines()]
    assert [(length, subject) for _, length, subject in named] == [
        ("80", LONG + " and on"),
        ("73", LONG),
    ]
    assert [len(abbrev) >= 7 for abbrev, _, _ in named] == [True, True]
    assert longer_commit.startswith(named[0][0]) and long_commit.startswith(named[1][0])
    assert OLD_LONG not in done.stdout
    assert "2 subject(s)" in done.stderr


def test_commits_of_a_merged_branch_are_checked(repo: Path) -> None:
    _git(repo, "checkout", "--quiet", "-b", "topic")
    topic = _commit(repo, LONG)
    _git(repo, "checkout", "--quiet", "main")
    _commit(repo, "Meanwhile on main")
    _git(repo, "merge", "--quiet", "--no-ff", "-m", "Merge branch 'topic'", "topic")
    done = _run("--baseline", "baseline", "--repo", repo)
    assert done.returncode == 1
    abbrev, length, subject = done.stdout.rstrip("\n").split(" ", 2)
    assert (topic.startswith(abbrev), length, subject) == (True, "73", LONG)


def test_a_shallow_clone_without_the_baseline_is_not_checked(repo: Path, tmp_path: Path) -> None:
    baseline = _git(repo, "rev-parse", "baseline")
    _commit(repo, LONG)
    shallow = tmp_path / "shallow"
    _git(tmp_path, "clone", "--quiet", "--depth", "1", f"file://{repo}", str(shallow))
    assert _run("--baseline", baseline, "--repo", repo).returncode == 1  # the full history
    done = _run("--baseline", baseline, "--repo", shallow)
    assert done.returncode == 0
    assert f"baseline {baseline} is not in the history" in done.stdout


def test_by_default_it_checks_its_own_repository_after_fc88dab(repo: Path) -> None:
    _commit(repo, LONG)
    copy = repo / ".ci" / "commit-subjects"
    copy.parent.mkdir()
    shutil.copy(SCRIPT, copy)
    done = _run(script=copy)  # this repository holds no fc88dab
    assert done.returncode == 0
    assert "baseline fc88dab is not in the history" in done.stdout
    # With the repository's own baseline, the same default repository fails.
    assert _run("--baseline", "baseline", script=copy).returncode == 1
