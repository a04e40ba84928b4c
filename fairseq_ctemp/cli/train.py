"""fairseq-train, resumable to the same run: ctemp-train takes fairseq-train's arguments and runs
fairseq's own training with the ``--patience`` count carried in the checkpoints
(``fairseq_ctemp.early_stopping``) and exact resume (``fairseq_ctemp.exact_resume``: the batch
order, the learning-rate step and the plateau counts of the uninterrupted run). Without it, a run
resumed from checkpoint_last.pt counts its patience anew and trains longer than the same run
uninterrupted, as stock fairseq-train does.

    ctemp-train data-bin/ptb --user-dir "$(ctemp-user-dir)" --task language_modeling \\
        --save-dir ckpt --patience 3 ...       # interrupted: the same command resumes it

The count is carried in the workers that fairseq's multi-GPU training spawns too (they import the
plugin: ``--user-dir``). What fairseq-train would refuse, or fail on with a traceback after making
--save-dir, is refused in one line before it starts (``fairseq_ctemp.training_options``).
"""

import sys


def cli_main():
    """fairseq_cli.train.cli_main on sys.argv, inside ctemp-train's changes (ctemp_train.changes:
    the patience count carried, exact resume, examples too long for the model refused in one line)."""
    from fairseq_cli import train

    from .. import ctemp_train

    with ctemp_train.changes():
        train.cli_main()


def main(argv=None):
    from .. import logs, training_options

    # fairseq's usage and the plugin's option errors name the program
    args = sys.argv[1:] if argv is None else list(argv)
    problem = training_options.before_training(args, "ctemp-train")
    if problem:
        print(f"ctemp-train: error: {problem}", file=sys.stderr)
        sys.exit(2)
    sys.argv = ["ctemp-train", *args]
    logs.use_fairseq_train_format()
    cli_main()


if __name__ == "__main__":
    main()
