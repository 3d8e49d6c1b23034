"""The wallet's files: the site list, the activity log, the direct link's pairings, the clock
they write instants with, and the private, atomic file writes and user folders they use."""
