"""``python -m byoa_skills``: the same as ``byoa-skills``."""

import sys

from byoa_skills.cli import main

sys.exit(main())
