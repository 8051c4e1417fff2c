"""The deploy tests' image: Checkpoint's Dockerfile built with podman from `git archive HEAD` on a local Debian base
image, once per test run however many workers ask (``containers.image_for_run``), removed at the run's end.

The tests that use the image run last in a run, so that scripts/test's early start of its making overlaps with every
other test; one of them may still wait for it (a fresh machine makes the base image, then builds: a few minutes),
so their time limit covers the making of both, as well as their own run."""

from __future__ import annotations

import pytest

import containers

OWN_RUN = 120.0  # the suite's per-test limit, for what the test itself does


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that use the image after every other test of the run, so that its making (started early by
    scripts/test) overlaps with the rest of the suite; give each the time to wait for it all the same."""
    using = [item for item in items if "image" in getattr(item, "fixturenames", ())]
    for item in using:
        item.add_marker(pytest.mark.timeout(containers.IMAGE_TIMEOUT + OWN_RUN))
    items[:] = [item for item in items if item not in using] + using


@pytest.fixture(scope="session")
def image() -> str:
    """The name of this run's image of Checkpoint."""
    return containers.image_for_run(containers.run_id())
