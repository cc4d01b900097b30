"""The Ray cluster side of ``pools.train_pool_ray``: connecting to a cluster (``ray_init``), the device a
task sees, and the error that names what is missing (ray not installed, a cluster that cannot be reached)."""

from __future__ import annotations

from typing import Any

from ers_exact.util.errors import InputError

__all__ = ["RayError", "ray_init", "ray_task_device"]


class RayError(RuntimeError, InputError):
    """``--ray``: ray is not installed, or the cluster cannot be reached; the message says which."""


def ray_init(address: str) -> tuple[Any, bool]:
    """The ray module, connected to ``address`` (``local``: a new local instance); whether this call connected."""
    try:
        import ray
    except ImportError:
        raise RayError("--ray needs ray, which is not installed: pip install 'ers-deep[ray]'") from None
    if ray.is_initialized():
        return ray, False
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if sep and port.isdigit():  # ray.init retries an unreachable GCS for minutes: probe it first
        import socket

        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=10).close()
        except OSError as e:
            raise RayError(f"--ray {address}: cannot connect to a Ray cluster ({e.strerror or e})") from None
    try:
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except Exception as e:  # ConnectionError, RuntimeError, ValueError, ... depending on the ray version
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RayError(f"--ray {address}: cannot connect to a Ray cluster ({first})") from None
    return ray, True


def ray_task_device(device: str) -> str:
    """A Ray task's device: its one GPU is its ``cuda`` (``num_gpus=1`` hides the others), whatever ``cuda:N``
    the pool's config names."""
    return "cuda" if device.split(":", maxsplit=1)[0] == "cuda" else device
