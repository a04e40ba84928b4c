"""fairseq-train's own parser, the plugin loaded, as a check before any work: training options that
fairseq-train would refuse (an option it does not know, a bad value) stop a recipe or a sweep in
one line before it prepares data or starts a run, not each run once it has started.

    python -m fairseq_ctemp.training_options NAME DATA [fairseq-train options]
        (NAME: who is checking, for the error line; exit status 2 where fairseq-train refuses)
"""

import logging
import sys


class _Refused(Exception):
    pass


def refusal(train_args):
    """None where fairseq-train's parser takes ``train_args`` (DATA first), else its message."""
    from fairseq import options

    def refuse(message):  # argparse's error prints the usage and exits
        raise _Refused(message)

    parser = options.get_training_parser()
    parser.error = refuse
    try:
        options.parse_args_and_arch(parser, list(train_args))
    except _Refused as e:
        return str(e)
    except SyntaxError as e:
        return unreadable_list_value(train_args, e)
    return None


def unreadable_list_value(train_args, error):
    """fairseq reads list-valued options (--lr 1e-3,5e-4) with ast.literal_eval, whose SyntaxError
    argparse lets through (fairseq-train ends in a traceback): the message naming the option."""
    value = (error.text or "").strip()
    option = next((a for a, v in zip(train_args, train_args[1:]) if v == value), "a list option")
    return f"argument {option}: invalid value: {value!r} (a number, or numbers separated by commas)"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        sys.exit("usage: python -m fairseq_ctemp.training_options NAME DATA [fairseq-train options]")
    name, train_args = argv[0], argv[1:]
    logging.disable(logging.INFO)  # fairseq's import-time notes: a check prints its verdict alone
    message = refusal(train_args)
    if message is not None:
        print(f"{name}: error: fairseq-train refuses the training options: {message}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
