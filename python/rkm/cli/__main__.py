import sys

from rkm.cli.commands import main

sys.exit(main())
