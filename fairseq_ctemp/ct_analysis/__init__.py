"""Analyses of contextual temperatures (tau) of fairseq-ctemp language and translation models, one
module per job (dump, positions, trajectories, heatmap, case_study) over a shared loader and scorer;
``ctemp-ct-analysis`` (fairseq_ctemp/cli/ct_analysis.py) is their command line. The conventions
(what position ``pos`` means, how a translation model is scored) are in that command's help and in
docs/ct_analysis.md."""


class AnalysisError(Exception):
    """A user error: printed as ``ctemp-ct-analysis <command>: error: ...``, exit status 2."""
