"""Redaction of untrusted text before anyone sees it: secrets out of error messages, credentials
out of endpoints, and a content-free summary of a provider's words.

Why here, in the pure engine: an error travels from the LLM client through the lane runner,
the Dagster asset, the step failure, the event log and the CLI. Every one of those places
applies the same rules from this module, so a rule is written once and cannot drift.

Four tools:
- `redact_secrets(text, secrets)` replaces the secrets that were sent (the API key) and anything
  shaped like a credential: `Bearer <token>`, `sk-...` keys, `api_key=...`-style assignments,
  the password of a URL, long base64/hex-ish strings.
- `public_endpoint(url)` is the endpoint without user, password, query or fragment.
- `safe_summary(message, sent)` keeps at most a few leading words of a provider message, and
  only words that cannot carry what was sent (see its docstring for the rule).
- `redact_sent(answer, sent_secrets(key, api_base))` takes the exact secrets a request carried
  out of a model's answer before anything stores or publishes it."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

REDACTED = "[redacted]"

MIN_SECRET = 4
"""Known secrets shorter than this are not searched for: they would shred ordinary words."""

_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=:-]+|\b(basic)(\s+)[A-Za-z0-9+/]{8,}=*")
_SK_KEY = re.compile(r"\b(?:sk|pk|rk|ak)-[A-Za-z0-9._-]{6,}")
_ASSIGNMENT = re.compile(
    r"(?i)\b((?:x-)?api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|password|"
    r"passwd|authorization|key)(\\?[\"']?\s*[=:]\s*)(?:(\\?[\"'])(.{0,200}?)\3|([^\s\"',;&}]+))"
)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_LONG_SECRETISH = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/_-])")


_RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


_NAME_SEPARATORS = re.compile(r"[-/_.]")
MAX_MIXED_SEGMENT = 4
"""A name segment that mixes letters and digits (`4o`, `v2`, `2024`) is at most this long."""


def _looks_random(token: str) -> bool:
    """A long run of letters and digits mixed is a key, a hash or a token, not a word. Two
    exceptions: a lowercase UUID (how Dagster names runs: a message that names a run must keep
    it), and a name made of word-like segments (`anthropic/claude-haiku-4-5`, `gpt-4o-mini`:
    a model name is not a secret, and a message that hides it cannot be acted on)."""
    if _RUN_ID.fullmatch(token):
        return False
    segments = [s for s in _NAME_SEPARATORS.split(token) if s]
    if len(segments) > 1 and all(_word_like(s) for s in segments):
        return False
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    return has_digit and has_alpha


def _word_like(segment: str) -> bool:
    return segment.isalpha() or segment.isdigit() or len(segment) <= MAX_MIXED_SEGMENT


def _redact_assignment(match: re.Match[str]) -> str:
    quote = match.group(3) or ""
    return f"{match.group(1)}{match.group(2)}{quote}{REDACTED}{quote}"


def redact_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every known secret and every credential-shaped string replaced."""
    for secret in sorted((s for s in secrets if s and len(s) >= MIN_SECRET), key=len, reverse=True):
        for form in {secret, json.dumps(secret)[1:-1]}:
            text = text.replace(form, REDACTED)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _BEARER.sub(
        lambda m: f"{m.group(1) or m.group(3)}{m.group(2) or m.group(4)}{REDACTED}", text
    )
    text = _SK_KEY.sub(REDACTED, text)
    text = _ASSIGNMENT.sub(_redact_assignment, text)
    return _LONG_SECRETISH.sub(
        lambda m: REDACTED if _looks_random(m.group(0)) else m.group(0), text
    )


def public_endpoint(url: str | None) -> str | None:
    """The endpoint as it may be published: scheme, host, port and path; never the user, the
    password, the query (keys are often passed there) or the fragment."""
    if url is None:
        return None
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return REDACTED  # not a URL we can take apart: publish nothing of it
    if not parts.scheme or not host:
        return redact_secrets(url.split("?", 1)[0].split("#", 1)[0])
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc = f"{netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# --- provider messages ------------------------------------------------------------------------

SUMMARY_MAX_WORDS = 12
SUMMARY_MAX_CHARS = 120
MIN_SHARED_WORD = 4
"""A summary word of this many letters or more that occurs in what was sent ends the summary."""
MAX_SUMMARY_WORD = 20
SHARED_WINDOW = 16
"""No run of this many characters of a summary (normalized) may occur in what was sent."""

_TOKEN = re.compile(r"[A-Za-z]+|[0-9]+|\s+|.", re.DOTALL)
_SEPARATORS = frozenset(" ,.:;-()'")
_WORDS = re.compile(r"[A-Za-z]+")
_PROVIDER_PREFIX = re.compile(
    r"^\s*(?:litellm\.)?[A-Za-z]*(?:Error|Exception|Timeout)\s*:\s*"
    r"(?:[A-Za-z]+(?:Error|Exception)\s*[:-]\s*)*"
)


def _normalized(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


def _sent_forms(sent: Iterable[str]) -> list[str]:
    """Every text that was sent, as written and JSON-escaped (how an echo quotes it)."""
    forms: list[str] = []
    for text in sent:
        forms.append(text)
        forms.append(json.dumps(text))
        forms.append(json.dumps(text, ensure_ascii=False))
    return forms


def safe_summary(message: str, sent: Iterable[str]) -> str:
    """At most `SUMMARY_MAX_WORDS` leading words of a provider's message that cannot carry
    anything that was sent (the prompt, the unit text, the key).

    The rule, applied to the message after the exception-class prefixes litellm adds:
    - read words of ASCII letters (and numbers of at most 4 digits, like a status code),
      separated by blanks and `, . : ; - ( ) '`; the summary ends at the first other character
      (a quote, a brace, a bracket, a backslash, any non-ASCII letter: every JSON or quoted echo
      starts with one);
    - it ends before the first word of `MIN_SHARED_WORD`+ letters that occurs in what was sent
      (as written, JSON-escaped or not), and before any word longer than `MAX_SUMMARY_WORD`;
    - if, even so, `SHARED_WINDOW` characters of the summary (lowercased, words only) occur in
      what was sent, nothing of the message is kept.
    What remains is the provider's own phrasing ("Incorrect API key provided", "model does not
    exist"), never an echo, however the echo was escaped, cut or re-wrapped."""
    forms = _sent_forms(sent)
    sent_words = {w.lower() for form in forms for w in _WORDS.findall(form)}
    text = _PROVIDER_PREFIX.sub("", message, count=1).split("Error_str:", 1)[0]
    kept: list[str] = []
    words = 0
    for token in _TOKEN.findall(text):
        if token.isspace():
            kept.append(" ")
            continue
        if token.isalpha() and token.isascii():
            if len(token) > MAX_SUMMARY_WORD:
                break
            if len(token) >= MIN_SHARED_WORD and token.lower() in sent_words:
                break
            words += 1
        elif token.isdigit():
            if len(token) > 4:
                break
            words += 1
        elif token not in _SEPARATORS:
            break
        if words > SUMMARY_MAX_WORDS:
            break
        kept.append(token)
    summary = " ".join("".join(kept).split())
    if len(summary) > SUMMARY_MAX_CHARS:
        summary = summary[:SUMMARY_MAX_CHARS].rsplit(" ", 1)[0]
    summary = summary.rstrip(" ,.:;-('")
    if _shares_window(summary, forms):
        return ""
    return summary


def _shares_window(summary: str, forms: Iterable[str]) -> bool:
    norm = _normalized(summary)
    if len(norm) < SHARED_WINDOW:
        return False
    haystack = "\n".join(_normalized(form) for form in forms)
    return any(
        norm[i : i + SHARED_WINDOW] in haystack for i in range(len(norm) - SHARED_WINDOW + 1)
    )


REASON_MAX_CHARS = 300


def provider_reason(message: str, sent: Iterable[str]) -> str:
    """A provider's stated reason, shown where it is about our request rather than the user's
    text (a refused schema: "Invalid schema for response_format 'NpcList': In context=(),
    'additionalProperties' is required to be supplied and to be false"). The `message` of a
    JSON error body is taken when there is one; the result is one line of printable text of
    at most `REASON_MAX_CHARS`. If any `SHARED_WINDOW` characters of it occur in what was sent
    (the prompt, the transcript), it may be an echo: only the `safe_summary` is kept."""
    text = _PROVIDER_PREFIX.sub("", message, count=1)
    text = _json_error_message(text) or text
    text = "".join(ch for ch in " ".join(text.split()) if ch.isprintable())
    if len(text) > REASON_MAX_CHARS:
        text = text[:REASON_MAX_CHARS].rsplit(" ", 1)[0] + " ..."
    if _shares_window(text, _sent_forms(sent)):
        return safe_summary(message, sent)
    return text


def _json_error_message(text: str) -> str | None:
    """The innermost `message` of the first JSON object in `text` (provider error bodies:
    `{"error": {"message": ...}}`, `{"type": "error", "error": {...}}`), if any."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    found: str | None = None
    while isinstance(value, dict):
        if isinstance(value.get("message"), str):
            found = value["message"]
        value = value.get("error")
    if isinstance(value, str) and found is None:
        found = value  # Ollama: {"error": "..."}
    return found


_FIELD = re.compile(r"""["']?(type|code)["']?\s*[:=]\s*["']([A-Za-z0-9_.-]{1,48})["']""")


def provider_fields(message: str) -> dict[str, str]:
    """The provider's machine-readable error `type` and `code` when its message carries them
    (`'type': 'invalid_request_error'`): identifiers, not prose, so they are kept whole."""
    found: dict[str, str] = {}
    for match in _FIELD.finditer(message):
        found.setdefault(match.group(1), match.group(2))
    return found


# --- model answers ----------------------------------------------------------------------------


def sent_secrets(api_key: str | None, api_base: str | None) -> tuple[str, ...]:
    """The secrets a request carries, as a provider (or whatever sits behind it) could put
    them back into an answer: the API key; the endpoint's password, its `user:password` and
    the Basic credentials httpx builds from them (base64), each as written in the URL and
    percent-decoded; and the value of every query parameter (keys are often passed there).
    The user name alone is not a secret (it may be an ordinary word) and is not listed."""
    found: list[str] = [api_key] if api_key else []
    if api_base:
        try:
            parts = urlsplit(api_base.strip())
        except ValueError:
            parts = None
        if parts is not None:
            if parts.password is not None:
                user = parts.username or ""
                for password, name in {
                    (parts.password, user),
                    (unquote(parts.password), unquote(user)),
                }:
                    pair = f"{name}:{password}"
                    found += [password, pair, base64.b64encode(pair.encode()).decode()]
            for pair in parts.query.split("&"):
                raw = pair.partition("=")[2]
                found += [raw, unquote_plus(raw)]
    return tuple(dict.fromkeys(s for s in found if len(s) >= MIN_SECRET))


def redact_sent(text: str | None, secrets: Iterable[str]) -> str | None:
    """`text` (a model's answer) with every exact secret that was sent replaced by
    `[redacted]`: as written, JSON-escaped (also with `/` as `\\/`) and in any letter case.

    An answer is untrusted input like a provider's error, but unlike an error it is content:
    only the secrets themselves are replaced, never credential-shaped words (a long id in a
    transcript is not a key). The replacement contains no quote or backslash, so a JSON answer
    stays JSON of the same shape."""
    if not text:
        return text
    forms: set[str] = set()
    for secret in secrets:
        if len(secret) < MIN_SECRET:
            continue
        escaped = json.dumps(secret)[1:-1]
        forms.update({secret, escaped, escaped.replace("/", "\\/")})
    if not forms:
        return text
    pattern = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    return re.sub(pattern, REDACTED, text, flags=re.IGNORECASE)
