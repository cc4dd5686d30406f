"""The exit codes of every `topoplace` command, one rule for all.

0  the command did what was asked (a placement found, topics created, a service stopped cleanly)
1  the command ran and the answer is "no": the engine found no place (unschedulable),
   the schemas drifted, a service died on its own
2  bad input: an option, a file or a setting the command cannot use (argparse also exits 2)
"""

from __future__ import annotations

OK = 0
NO_PLACE = 1  # also: a check that failed, a service that died
BAD_INPUT = 2
