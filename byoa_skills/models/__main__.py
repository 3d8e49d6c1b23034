"""``python -m byoa_skills.models``: the ``models`` command on its own."""

import sys

from .cli import main

sys.exit(main())
