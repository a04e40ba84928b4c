#!/usr/bin/env python
"""train_and_decode.sh's check, before the training, of its final decoding's options (DEVICE_ARGS and
GENERATE_ARGS, which it hands to ctemp-greedy-vs-beam after --): one line naming what that tool
would refuse once the training had ended.

Usage: python examples/softmax_tempering/check_decoding_options.py [fairseq-generate options]
"""

import sys

from fairseq_ctemp.greedy_vs_beam import UsageError, checks


def main(argv):
    try:
        checks.decoding_options(argv)
    except UsageError as e:
        sys.exit(
            "train_and_decode.sh: error: DEVICE_ARGS / GENERATE_ARGS: " + str(e).removeprefix("after --: ")
        )


if __name__ == "__main__":
    main(sys.argv[1:])
