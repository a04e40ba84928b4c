"""The ALT pipeline (ctemp-alt-data, ctemp-alt-sweep, ctemp-alt-results): one job per module."""
