import os
import sys

from training.cli import main

code = main()
if int(os.environ.get("WORLD_SIZE", "1")) > 1:
    # A torchrun worker leaves without the interpreter's teardown. DistributedDataParallel keeps its
    # process group alive after destroy_process_group (its gloo threads still run once main()
    # returns: gdb, session 34), and tearing the interpreter down beside them aborted a worker about
    # once in fifty two-process test runs ("terminate called without an active exception", no Python
    # frame left). By now the run has written and closed every file it writes.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
