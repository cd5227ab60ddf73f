import logging

# The client logs the failure policy's decisions; the tests cause many.
logging.getLogger("sluice").addHandler(logging.NullHandler())
logging.getLogger("sluice").propagate = False
