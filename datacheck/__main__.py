import sys

from datacheck.cli.main import main

sys.exit(main())
