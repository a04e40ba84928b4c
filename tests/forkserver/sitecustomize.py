"""Tests only (this directory is on PYTHONPATH in the suite): run this process's command in the
fork server's preloaded worker where it can (ctemp_forkserver)."""

import ctemp_forkserver

ctemp_forkserver.hand_over()
