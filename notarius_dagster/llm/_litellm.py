"""The one place litellm is imported and configured, so every user gets the same quiet,
content-safe settings: no debug banners, no prompts in exception texts or logging callbacks,
no network fetches for cost maps or tokenizers. litellm lives as long as the process that
imports it: it is loaded for life (notarius_dagster.engine.long_lived.py), so the collector does not
keep walking its few million objects."""

from __future__ import annotations

import os

from notarius_dagster.engine.long_lived import loading_for_life

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

with loading_for_life():
    import litellm
    from litellm.types.utils import Choices, ModelInfo, ModelResponse

litellm.suppress_debug_info = True
# litellm otherwise appends the request messages to some exception texts.
litellm.redact_messages_in_exceptions = True
# Logging callbacks (if anyone adds one) receive redacted messages.
litellm.turn_off_message_logging = True
litellm.disable_hf_tokenizer_download = True

__all__ = ["Choices", "ModelInfo", "ModelResponse", "litellm"]
"""litellm itself, and the types of what it answers (imported here, after the settings above,
so that no module reaches litellm before they are made)."""
