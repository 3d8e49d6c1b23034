"""The reference servers to try the engine against: a site (``site``) and a BYOAg platform
(``platform``). Neither imports the other."""
