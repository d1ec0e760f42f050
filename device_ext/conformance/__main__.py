"""`python -m device_ext.conformance`: see cli.py."""

import sys

from .cli import main

sys.exit(main())
