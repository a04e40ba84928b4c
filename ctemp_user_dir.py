"""ctemp-user-dir: print the directory to pass as --user-dir, wherever fairseq_ctemp is installed:

fairseq-train ... --user-dir "$(ctemp-user-dir)"

A module of its own, outside the package: importing fairseq_ctemp imports fairseq (seconds), and a
command run inside every fairseq command line should not.
"""

import argparse
import importlib.util
import sys


def plugin_dir():
    """fairseq_ctemp's directory, found without importing it."""
    spec = importlib.util.find_spec("fairseq_ctemp")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"ctemp-user-dir: error: no fairseq_ctemp package on the path of {sys.executable}")
    return spec.submodule_search_locations[0]


def main(argv=None):
    argparse.ArgumentParser(prog="ctemp-user-dir", description=__doc__.strip().split("\n")[0]).parse_args(
        argv
    )
    print(plugin_dir())


if __name__ == "__main__":
    main()
