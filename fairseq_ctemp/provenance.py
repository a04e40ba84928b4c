"""Which code made a result: the commit of the git checkout this package runs from."""

import os
import subprocess
from typing import Optional

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def code_commit(path: str = PACKAGE_DIR) -> Optional[str]:
    """The short commit of the checkout holding ``path``, with "+changes" when its tracked files
    differ from it; None outside a git checkout (an installed package) or without git."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", path, *args], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+changes" if changed else "")


if __name__ == "__main__":  # for the shell recipes (examples/language_model/train.sh)
    print(code_commit() or "unknown")
