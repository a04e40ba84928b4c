"""ctemp-user-dir: print the directory to pass as --user-dir, wherever fairseq_ctemp is installed:

fairseq-train ... --user-dir "$(ctemp-user-dir)"

A module of its own, outside the package: importing fairseq_ctemp imports fairseq (seconds), and a
command run inside every fairseq command line should not.
"""

import argparse
import importlib.util


def plugin_dir():
    """fairseq_ctemp's directory, found without importing it."""
    return importlib.util.find_spec("fairseq_ctemp").submodule_search_locations[0]


def main(argv=None):
    argparse.ArgumentParser(prog="ctemp-user-dir", description=__doc__.strip().split("\n")[0]).parse_args(
        argv
    )
    print(plugin_dir())


if __name__ == "__main__":
    main()
