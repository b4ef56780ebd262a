"""One model request through an SDK, as the Rust providers make it: the SDK's own retries off,
ours on (408, 409, 429 but an exhausted quota, 5xx, failed connections; `Retry-After`
honoured up to a bound), the whole request bounded in time, and each refusal turned into the
`ProviderError` a user can act on.

The OpenAI and Anthropic SDKs raise errors of the same shape (`APIStatusError` with the HTTP
response, `APIConnectionError`, `APITimeoutError`); each provider passes its SDK's classes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import anyio

from .llm import (
    Api,
    BadKey,
    BadResponse,
    NoToolCalling,
    ProviderConfig,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    Rejected,
    ServerError,
    UnknownModel,
    Unreachable,
)

logger = logging.getLogger("autotool")

DETAIL_LIMIT = 500
"""How much of an error body goes into a message, in characters."""

T = TypeVar("T")

NO_KEY = "not-needed"
"""Stands in for the key of a server that needs none: the SDKs want one, and such requests are
sent with the key's header left out."""

_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True)
class SdkErrors:
    """An SDK's exception classes."""

    status: type[Exception]
    """`APIStatusError`: `.status_code`, `.response` (headers, text)."""
    timeout: type[Exception]
    """`APITimeoutError` (a subclass of `connection`)."""
    connection: type[Exception]
    """`APIConnectionError`."""
    validation: type[Exception]
    """`APIResponseValidationError`."""


def retryable(status: int, body: str) -> bool:
    """Whether an error answer may pass on a second try."""
    if status == 429:
        return "insufficient_quota" not in body
    return status in (408, 409) or status >= 500


def _seconds(value: float) -> float | None:
    if value != value or value < 0 or value == float("inf"):
        return None
    return min(value, 86_400.0)


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """How long the server asks to wait: `retry-after-ms` (OpenAI), else `Retry-After` in
    seconds or as an HTTP date."""

    def header(name: str) -> str | None:
        value = headers.get(name)
        return str(value).strip() if value is not None else None

    ms = header("retry-after-ms")
    if ms is not None:
        try:
            return _seconds(float(ms) / 1000.0)
        except ValueError:
            pass
    value = header("retry-after")
    if value is None:
        return None
    try:
        return _seconds(float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def truncate(text: str) -> str:
    return text if len(text) <= DETAIL_LIMIT else text[:DETAIL_LIMIT] + "…"


def error_detail(status: int, body: str) -> str:
    """The readable part of an error body: `{"error": {"type"|"code", "message"}}` (OpenAI,
    Anthropic), `{"error": "…"}` (Ollama), `{"message"|"detail": "…"}`, else the text itself."""
    found: str | None = None
    try:
        value = json.loads(body)
    except ValueError:
        value = None
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, str):
            found = error
        elif isinstance(error, dict) and isinstance(error.get("message"), str):
            code = error.get("code")
            if code is None:
                code = error.get("type")
            label = None if code is None else code if isinstance(code, str) else json.dumps(code)
            found = f"{label}: {error['message']}" if label is not None else error["message"]
        else:
            for key in ("message", "detail"):
                if isinstance(value.get(key), str):
                    found = value[key]
                    break
    text = found if found is not None else body.strip()
    if not text:
        return _REASONS.get(status, "no details given")
    return truncate(text)


def _refuses_tools(lower: str) -> bool:
    return any(
        s in lower
        for s in (
            "does not support tool",
            "doesn't support tool",
            "support tool use",
            "tool use is not supported",
            "tools are not supported",
            "tool calling is not supported",
            "tool calls are not supported",
            "function calling is not supported",
            "does not support function calling",
            "enable-auto-tool-choice",
        )
    )


def _names_unknown_model(lower: str) -> bool:
    return "model_not_found" in lower or (
        "model" in lower
        and any(
            s in lower
            for s in (
                "not found",
                "not_found",
                "does not exist",
                "not a valid model",
                "invalid model",
                "unknown model",
                "no such model",
            )
        )
    )


def classify(api: Api, model: str, url: str, status: int, body: str, wait: float | None) -> ProviderError:
    """The error an API answered with `status` and `body` stands for."""
    detail = error_detail(status, body)
    lower = detail.lower()
    provider = api.value
    if status == 401:
        return BadKey(provider, detail)
    if status == 403:
        if _names_unknown_model(lower) or "access to model" in lower:
            return UnknownModel(model, detail)
        return BadKey(provider, detail)
    if status == 429:
        return RateLimited(provider, detail, wait)
    if status in (408, 409) or status >= 500:
        return ServerError(status, detail)
    if _refuses_tools(lower):
        return NoToolCalling(model, detail)
    if status in (400, 404, 422) and _names_unknown_model(lower):
        return UnknownModel(model, detail)
    if status == 404:
        return Rejected(
            404,
            f"{url} does not exist ({detail}); check the base URL (OpenAI-compatible servers usually end in /v1)",
        )
    return Rejected(status, detail)


def error_chain(error: BaseException) -> str:
    """An error with its causes, "a: b: c" (the cause holds the useful part: connection
    refused, certificate unknown)."""
    text = str(error) or type(error).__name__
    cause = error.__cause__ or error.__context__
    seen = 0
    while cause is not None and seen < 8:
        cause_text = str(cause) or type(cause).__name__
        if cause_text not in text:
            text = f"{text}: {cause_text}"
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return text


async def request(config: ProviderConfig, errors: SdkErrors, send: Callable[[], Awaitable[T]]) -> T:
    """`send()` once, and again while the failure may pass (see the module's doc)."""
    url = config.endpoint()
    attempt = 0
    while True:
        wait: float | None = None
        try:
            with anyio.fail_after(config.timeout):
                return await send()
        except TimeoutError as exc:
            raise ProviderTimeout() from exc
        except errors.timeout as exc:
            raise ProviderTimeout() from exc
        except errors.validation as exc:
            raise BadResponse(str(exc)) from exc
        except errors.status as exc:
            response: Any = getattr(exc, "response", None)
            status = int(getattr(exc, "status_code", 0) or 0)
            body = _body(response)
            wait = retry_after(response.headers) if response is not None else None
            error: ProviderError = classify(config.api, config.model, url, status, body, wait)
            if not retryable(status, body):
                raise error from exc
            cause: Exception = exc
        except errors.connection as exc:
            error = Unreachable(error_chain(exc))
            cause = exc
        except (ValueError, KeyError) as exc:
            # An answer whose body is not JSON, or not of the API's shape.
            raise BadResponse(f"{type(exc).__name__}: {exc}") from exc
        if attempt >= config.retry.max_retries:
            raise error from cause
        if wait is not None and wait > config.retry.max_retry_after:
            raise error from cause
        delay = wait if wait is not None else config.retry.backoff(attempt)
        attempt += 1
        logger.warning(
            "model request failed (%s); retry %d of %d in %.1f s",
            error,
            attempt,
            config.retry.max_retries,
            delay,
        )
        await anyio.sleep(delay)


def _body(response: Any) -> str:
    if response is None:
        return ""
    try:
        return str(response.text)
    except Exception:  # noqa: BLE001 - a body that cannot be read is an empty one
        return ""
