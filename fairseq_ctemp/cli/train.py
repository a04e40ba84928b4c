"""fairseq-train, resumable to the same early stop: ctemp-train takes fairseq-train's arguments and
runs fairseq's own training unchanged, with the ``--patience`` count carried in the checkpoints
(``fairseq_ctemp.early_stopping``). Without it, a run resumed from checkpoint_last.pt counts its
patience anew and trains longer than the same run uninterrupted.

    ctemp-train data-bin/ptb --user-dir "$(ctemp-user-dir)" --task language_modeling \\
        --save-dir ckpt --patience 3 ...       # interrupted: the same command resumes it

The count is carried in the workers that fairseq's multi-GPU training spawns too (they import the
plugin: ``--user-dir``).
"""

import sys


def cli_main():
    """fairseq_cli.train.cli_main on sys.argv, with the patience count carried."""
    from fairseq_cli import train

    from .. import early_stopping

    with early_stopping.carried_in_checkpoints():
        train.cli_main()


def main(argv=None):
    from .. import logs

    # fairseq's usage and the plugin's option errors name the program
    sys.argv = ["ctemp-train", *(sys.argv[1:] if argv is None else argv)]
    logs.use_fairseq_train_format()
    cli_main()


if __name__ == "__main__":
    main()
