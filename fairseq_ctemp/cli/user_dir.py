"""Print the directory to pass as --user-dir, wherever the package is installed:

fairseq-train ... --user-dir "$(ctemp-user-dir)"
"""

import argparse


def main(argv=None):
    argparse.ArgumentParser(prog="ctemp-user-dir", description=__doc__.strip().split("\n")[0]).parse_args(
        argv
    )
    from fairseq_ctemp import USER_DIR

    print(USER_DIR)


if __name__ == "__main__":
    main()
