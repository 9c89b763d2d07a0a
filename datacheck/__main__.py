import sys

from datacheck.cli import main

sys.exit(main())
