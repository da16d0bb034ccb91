import sys

from training.corpus.cli import main

sys.exit(main())
