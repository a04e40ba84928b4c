"""Print the directory to pass as --user-dir, wherever the package is installed:

fairseq-train ... --user-dir "$(ctemp-user-dir)"
"""

import argparse
import os


def main(argv=None):
    argparse.ArgumentParser(prog="ctemp-user-dir", description=__doc__.strip().split("\n")[0]).parse_args(
        argv
    )
    import fairseq_ctemp

    print(os.path.dirname(os.path.abspath(fairseq_ctemp.__file__)))


if __name__ == "__main__":
    main()
