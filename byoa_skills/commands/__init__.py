"""The subcommands of ``byoa-skills``: one module each, wired together in :mod:`byoa_skills.cli`."""
