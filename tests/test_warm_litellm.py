"""litellm's lazy first-call work done offline before a lane's deadline starts
(notarius_dagster/llm/warm.py, called by `LLMResource.load_client`): it must really load what
litellm's first completion loads, send nothing, and leave no key behind. If a litellm upgrade
breaks the warm-up (it never raises), this fails instead of every run silently paying the first
call's imports on its lanes' time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Imported inside litellm's first `completion` (its file-id handling), not by `import litellm`.
LAZY_MODULE = "litellm.proxy.openai_files_endpoints.common_utils"


def test_warm_up_loads_the_first_calls_modules_offline_once() -> None:
    script = textwrap.dedent(
        f"""
        import json, os, socket, sys
        import notarius_dagster.llm.client  # litellm imported, nothing called yet
        before = {LAZY_MODULE!r} in sys.modules
        connects = []
        real_connect = socket.socket.connect
        def connect(self, address):
            connects.append(str(address))
            return real_connect(self, address)
        socket.socket.connect = connect
        from notarius_dagster.llm.warm import warm_litellm
        first = warm_litellm()
        second = warm_litellm()
        print(json.dumps({{
            "before": before,
            "after": {LAZY_MODULE!r} in sys.modules,
            "first_cpu_s": first,
            "second_cpu_s": second,
            "connects": connects,
            "key_left": "NOTARIUS_WARM_UP_KEY" in os.environ,
        }}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] is False
    assert seen["after"] is True
    assert seen["first_cpu_s"] > 0
    assert seen["second_cpu_s"] == 0
    assert seen["connects"] == []
    assert seen["key_left"] is False
