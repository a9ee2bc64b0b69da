"""How a session run is made: the Dagster code location (`definitions.py`), the runner the CLI
calls (`runner.py`), the forkserver of `notarius run`'s session workers (`workers.py`) and the
summary printed after a run (`summary.py`). Nothing below this
package (engine, lanes, LLM client, the Dagster assets and resources) imports it."""
