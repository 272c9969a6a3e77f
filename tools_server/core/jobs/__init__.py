"""Jobs: ``cpu`` and ``gpu`` tools run in worker processes while the server keeps answering.

* :mod:`~tools_server.core.jobs.model`: the :class:`Job` and how callers wait on it;
* :mod:`~tools_server.core.jobs.store`: job records on disk (``job_wait`` after a restart);
* :mod:`~tools_server.core.jobs.manager`: the :class:`JobManager` and the :class:`Executor` protocol;
* :mod:`~tools_server.core.jobs.local`: long-lived worker processes on this machine (the default);
* :mod:`~tools_server.core.jobs.dask`: a Dask ``distributed`` cluster (``SPU_EXECUTOR=dask``).
"""

from tools_server.core.jobs.manager import Executor, JobManager, executor_from_env
from tools_server.core.jobs.model import TERMINAL, Job
from tools_server.core.jobs.store import JobStore

__all__ = ["TERMINAL", "Executor", "Job", "JobManager", "JobStore", "executor_from_env"]
