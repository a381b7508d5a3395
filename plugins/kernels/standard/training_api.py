"""The ``tf.train`` API for running training: coordinators, queue runners, monitored
sessions and their hooks, and synchronous replicas."""
from __future__ import annotations

from flowrt import coordinator as _coord
from flowrt import monitored_session as _ms

from . import sync_replicas  # noqa: F401 - exports train.SyncReplicasOptimizer
from ._common import ks

for _name in ("Coordinator", "QueueRunner", "LooperThread"):
    ks.export(f"train.{_name}", getattr(_coord, _name))
ks.export("train.add_queue_runner", _coord.add_queue_runner)
ks.export("train.start_queue_runners", _coord.start_queue_runners)
ks.export("train.queue_runner.QueueRunner", _coord.QueueRunner)
ks.export("train.queue_runner.add_queue_runner", _coord.add_queue_runner)
ks.export("train.queue_runner.start_queue_runners", _coord.start_queue_runners)
for _name in ("SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues",
              "Scaffold", "SessionManager", "SessionCreator", "ChiefSessionCreator",
              "WorkerSessionCreator", "MonitoredSession", "SingularMonitoredSession",
              "MonitoredTrainingSession", "SecondOrStepTimer", "StopAtStepHook",
              "CheckpointSaverHook", "CheckpointSaverListener", "NanTensorHook",
              "NanLossDuringTrainingError", "LoggingTensorHook", "StepCounterHook",
              "GlobalStepWaiterHook", "FinalOpsHook", "FeedFnHook", "SummarySaverHook"):
    ks.export(f"train.{_name}", getattr(_ms, _name))
