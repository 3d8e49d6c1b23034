"""byoa-skills: the engine that runs a BYOA agent wallet's skills on the visitor's computer."""

__version__ = "0.1.0"
