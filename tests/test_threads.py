"""How the core's OpenMP threads wait: passive by default, the user's policy when set."""

import json
import os
import subprocess
import sys

import pytest

_REPORT = (
    "import json, os, rkm; from rkm._utils.config import config\n"
    "print(json.dumps([config()['omp_wait_policy'], os.environ.get('OMP_WAIT_POLICY')]))"
)


def _policies(environment):
    output = subprocess.run(
        [sys.executable, "-c", _REPORT], env=environment, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def test_core_loads_with_passive_waiting_and_restores_the_environment():
    environment = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    assert _policies(environment) == ["passive (rkm's default)", None]


@pytest.mark.parametrize("policy", ["active", "PASSIVE"])
def test_a_policy_the_user_set_is_kept(policy):
    assert _policies({**os.environ, "OMP_WAIT_POLICY": policy}) == [policy, policy]
