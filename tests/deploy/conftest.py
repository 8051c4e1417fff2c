"""The deploy tests' image: Checkpoint's Dockerfile built with podman from `git archive HEAD` on a local Debian base
image, once per test run however many workers ask (``containers.image_for_run``), removed at the run's end."""

from __future__ import annotations

import pytest

import containers


@pytest.fixture(scope="session")
def image() -> str:
    """The name of this run's image of Checkpoint."""
    return containers.image_for_run(containers.run_id())
