"""Print the directory to pass as --user-dir, wherever the package is installed:

    fairseq-train ... --user-dir "$(ctemp-user-dir)"
"""
import os


def main():
    import fairseq_ctemp

    print(os.path.dirname(os.path.abspath(fairseq_ctemp.__file__)))


if __name__ == "__main__":
    main()
