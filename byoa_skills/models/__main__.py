"""``python -m byoa_skills.models``: the ``models`` command on its own."""

import sys

from byoa_skills.models.cli import main

sys.exit(main())
