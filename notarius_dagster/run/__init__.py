"""How a session run is made: the Dagster code location (`definitions.py`), the runner the CLI
calls (`runner.py`), the forkserver and its step processes (`step_processes.py`,
`forkserver_job.py`) and the summary printed after a run (`summary.py`). Nothing below this
package (engine, lanes, LLM client, the Dagster assets and resources) imports it."""
