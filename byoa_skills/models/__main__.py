"""``python -m byoa_skills.models``: the ``models`` command on its own."""

import sys

from byoa_skills.commands.models import main

sys.exit(main())
