"""``baseline:ENTRY``: a keyless model that ranks every group by one entry of the task's card.

It runs the agent's loop like any model: it reads the task with the agent's tools, has the entry's values
computed (molecular descriptors and declared tool proxies by the tool server, the rest by the screen's own
code), ranks every group by them in the entry's direction, and submits with ``submit_rankings``; the run
folder holds what a real run's does (trajectory, report, drafts, ``rankings.json``, ``sources.json``), so
``spu batch``, ``spu report``, ``spu analyze`` and ``spu view`` work on every suite task without a key.

``ENTRY`` is spelled as the card names its entries (:mod:`.entries`: ``best``, ``NAME [DIRECTION]``,
``proxy[:NAME]``); how the values are had and ranked is in :mod:`.values`, the turns in :mod:`.model`.
"""

from scaffold.agent.models.baseline.model import BaselineModel

__all__ = ["BaselineModel"]
