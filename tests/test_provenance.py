"""provenance.code_commit: the commit of the checkout the package runs from, or None outside one."""

import subprocess

from conftest import checkout_commit

from fairseq_ctemp import provenance


def test_the_commit_of_this_checkout_and_whether_tracked_files_changed():
    assert provenance.code_commit() == checkout_commit()


def test_an_edited_tracked_file_is_marked_and_an_untracked_one_is_not(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", tmp_path, *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("1\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    head = subprocess.run(
        ["git", "-C", tmp_path, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (tmp_path / "b.txt").write_text("untracked\n")
    assert provenance.code_commit(str(tmp_path)) == head
    (tmp_path / "a.txt").write_text("2\n")
    assert provenance.code_commit(str(tmp_path)) == head + "+changes"


def test_none_outside_a_checkout(tmp_path):
    assert provenance.code_commit(str(tmp_path)) is None
