"""The one grant decision every way in asks (a page's request, a link, a link's return after
a restart, a paired platform's registration), with its steps (the fit, the scope, what a site
may get on its own, the consent desk, the offer an Allow gives), and the one owner of the
visitor's changes to a site (pause, resume, block, forget, limits, "decide on my own")."""
