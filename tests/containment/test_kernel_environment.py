"""What the kernel's environment may change (issue 39, finding 11): nothing that weakens the
sandbox. Whatever can put a variable into a kernel's environment (a server's, a spawner's or a
gateway's configuration) is not the kernelspec. The benchmark's switch that turned the workspace
broker off was such a variable; it is now a policy flag, in the kernelspec's argv and said in the
banner and kernel_info. The table of every variable the kernel reads, and the scan of the sources
that keeps it complete, are the unit test `[policy][environment]`
(tests/unit/sandbox/policy/environment_reads.cpp)."""
import json
import shutil

import pytest

from belljar_testing import (
    NO_NAMESPACES,
    execute,
    kernel_info,
    running_kernel,
    sandbox_writable_dir,
    stdout_of,
)

MODES = {"strict": ([], ["--isolation", "strict"]),
         "degraded": ([NO_NAMESPACES], ["--isolation", "degraded"])}
OFF = "workspace broker: OFF"
# A dot-file made in the workspace: what the broker refuses (the shell of whoever opens a
# terminal there would run it).
PLANT = """
import json
try:
    with open('.bashrc', 'w') as f:
        f.write('echo planted\\n')
    print(json.dumps('made'))
except OSError as e:
    print(json.dumps(type(e).__name__))
"""


def planted(mode, flags=(), env=None):
    wrapper, isolation = MODES[mode]
    ws = sandbox_writable_dir("belljar-env-")
    try:
        with running_kernel(flags=["--timeout", "30", *isolation, *flags], workspace=str(ws),
                            wrapper=wrapper, env=env) as (km, kc):
            info = kernel_info(kc)
            reply, out = execute(kc, PLANT)
            assert reply["content"]["status"] == "ok", out
            return json.loads(stdout_of(out)), info, (ws / ".bashrc").exists()
    finally:
        shutil.rmtree(ws, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_the_old_benchmark_variable_does_not_turn_the_broker_off(mode):
    # On the old code the variable turned the broker off: the dot-file was made.
    outcome, info, exists = planted(mode, env={"BELLJAR_BENCH_WORKSPACE_BROKER_OFF": "1"})
    assert outcome == "PermissionError" and not exists, outcome
    assert not any(OFF in note for note in info["belljar"]["notes"]), info["belljar"]["notes"]


@pytest.mark.parametrize("mode", MODES)
def test_control_the_benchmark_flag_turns_it_off_and_says_so(mode):
    # The probe is real: with the broker off the same cell makes the dot-file, and the flag that
    # turns it off is in the kernelspec's argv and said in the banner and kernel_info.
    outcome, info, exists = planted(mode, flags=["--bench-unbrokered-workspace"])
    assert outcome == "made" and exists, outcome
    assert any(OFF in note for note in info["belljar"]["notes"]), info["belljar"]["notes"]
    assert OFF in info["banner"]
