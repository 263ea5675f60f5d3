"""Where runs are carried out: a local pool, or Ray. The same :func:`execute` either way.

- **Locally** (:func:`run_local`), ``jobs`` runs at a time: each run is its own ``keel run``
  process (and its check's ``keel exec``), so the pool's threads only start them and wait;
  ``jobs=1`` runs them one after another in this thread.
- **On Ray** (:func:`run_ray`), each run is a Ray task that asks for the task's ``cpus`` (and
  ``memory_mb``). ``address="auto"`` starts a Ray instance on this machine for the evaluation
  (on 127.0.0.1 only, no dashboard, no usage reporting; ``jobs`` CPUs, default all) and
  stops it afterwards (~4-5 s of start and stop: ``bench/RESULTS.md``); any other address
  joins a running cluster (``ray://HOST:10001``, or ``HOST:6379`` from a node of it), whose
  workers must have keel installed. Note that this is not Ray's own ``address="auto"`` (join
  the local cluster): keel's ``auto`` starts one.

Records come back as runs finish (``on_output`` is called in the calling thread), in any
order; the report sorts them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from keel.core.errors import RunError
from keel.eval._runner import STOPPING, RunOutput, RunRecord, RunSpec, execute, stop_running

OnOutput = Callable[[RunOutput], None]
AUTO = "auto"
OBJECT_STORE_BYTES = 256 * 1024 * 1024
"""The object store of a Ray started by ``auto``: runs pass archives of small workspaces."""


def run_local(specs: Sequence[RunSpec], jobs: int, on_output: OnOutput) -> None:
    """Carry out ``specs``, ``jobs`` at a time, handing each output over as it is done."""
    STOPPING.clear()
    if jobs <= 1:
        try:
            for spec in specs:
                on_output(execute(spec))
        except BaseException:
            stop_running()
            raise
        return
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="keel-eval") as pool:
        futures = [pool.submit(execute, spec) for spec in specs]
        try:
            for future in as_completed(futures):
                on_output(future.result())
        except BaseException:  # an interrupt: start nothing more, end what runs
            pool.shutdown(wait=False, cancel_futures=True)
            stop_running()
            raise


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        RunError: Ray is not installed (``eval.ray_missing``, with the command that adds it).
    """
    try:
        import ray
    except ImportError as exc:
        from keel.core.installed import hint

        raise RunError(
            f"--ray needs Ray, which is not installed here: {hint('ray')}",
            code="eval.ray_missing",
        ) from exc
    return ray


def run_ray(specs: Sequence[RunSpec], address: str, jobs: int | None, on_output: OnOutput) -> None:
    """Carry out ``specs`` as Ray tasks (see the module).

    Raises:
        RunError: Ray is missing (``eval.ray_missing``) or cannot start or be reached
            (``eval.ray``).
    """
    if address == AUTO:
        _single_node_settings()
    elif _on_loopback(address):
        _loopback_settings()
    ray = import_ray()
    # a Ray started here keeps its sessions, sockets and logs here, and they go with it
    temp = tempfile.mkdtemp(prefix="keel-ray-") if address == AUTO else None
    try:
        _start(ray, address, jobs, temp)
        remote = ray.remote(execute)
        pending: dict[Any, RunSpec] = {}
        for spec in specs:
            options: dict[str, Any] = {"num_cpus": spec.cpus, "max_retries": 0}
            if spec.memory_mb:
                options["memory"] = spec.memory_mb * 1024 * 1024
            pending[remote.options(**options).remote(spec)] = spec
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                spec = pending.pop(ref)
                on_output(_get(ray, ref, spec))
    finally:
        ray.shutdown()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def _single_node_settings() -> None:
    """Before Ray is imported: a Ray of this machine only, on 127.0.0.1, reporting nothing.

    Ray gives its processes the machine's address, even with ``_node_ip_address`` set to the
    loopback; with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (read once, at import) it takes
    127.0.0.1 for every one of them, as it does on a laptop. Usage statistics stay off, and a
    ``RAY_ADDRESS`` in the environment, which ``ray.init`` would join instead, is dropped.
    """
    _loopback_settings()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.pop("RAY_ADDRESS", None)  # ray.init would join that cluster instead


def _loopback_settings() -> None:
    """This process takes part in Ray as 127.0.0.1 (see :func:`_single_node_settings`).

    Also for joining a cluster given by a loopback address (``--ray 127.0.0.1:6379``, a Ray
    started on this machine with ``--node-ip-address 127.0.0.1``): without it the driver
    registers with the machine's own address, which that cluster does not serve, and Ray
    retries forever.
    """
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def _on_loopback(address: str) -> bool:
    """``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) names this machine's loopback."""
    host = address.removeprefix("ray://").rpartition(":")[0] or address
    return host.strip("[]") in {"127.0.0.1", "localhost", "::1"}


def _start(ray: Any, address: str, jobs: int | None, temp: str | None) -> None:
    import logging

    try:
        if address == AUTO:
            ray.init(
                num_cpus=jobs or os.cpu_count() or 1,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
                object_store_memory=OBJECT_STORE_BYTES,
                _node_ip_address="127.0.0.1",
                _temp_dir=temp,
            )
            _stop_autoscaler_monitor(ray)
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
        where = "start a local Ray" if address == AUTO else f"reach the Ray cluster at {address!r}"
        raise RunError(f"--ray: cannot {where}: {exc}", code="eval.ray") from exc


def _stop_autoscaler_monitor(ray: Any) -> None:
    """End the autoscaler's monitor of a Ray started here: a fixed single node has no use for it.

    ``ray.init`` cannot be told not to start it (``ray start --no-monitor`` can), it takes a
    core's share while its Python starts, and at ``ray.shutdown`` it ignores the polite
    signal, so Ray waits a full second before killing it (``bench/RESULTS.md``). A Ray that
    no longer has the private ``_global_node`` keeps its monitor: only time is lost.
    """
    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(node, "_global_node", None)
    kill = getattr(node, "kill_monitor", None)
    if callable(kill):
        kill(check_alive=False)


def _get(ray: Any, ref: Any, spec: RunSpec) -> RunOutput:
    try:
        return ray.get(ref)
    except Exception as exc:  # a worker that died, a task Ray could not place
        record = RunRecord(spec.run_id, spec.task, spec.arm, spec.repeat, spec.trap)
        record.error = f"the Ray task failed: {type(exc).__name__}: {str(exc)[:500]}"
        return RunOutput(record, b"")
