"""The chat model: one OpenAI-compatible endpoint, reached with the `openai` package (runs in the bench process).

The package is the `bench` extra's; without it the bench says how to install it. Before any GPU work the
endpoint is checked with a one-token answer, so a wrong address, a bad key or an unknown model is a clear error
and a non-zero exit, not a failed search.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .settings import EndpointSettings

EXTRA_HINT = "install the bench extra: pip install 'adaexplore[bench]'"


class EndpointError(RuntimeError):
    """The endpoint cannot be used: unreachable, key refused, model unknown, or the client missing."""


@dataclass
class Answer:
    """One model answer and what it cost."""

    text: str
    tokens: int


def endpoint_settings(base_url: str | None, model: str | None, api_key: str | None, temperature: float = 0.7,
                      max_answer_tokens: int | None = None) -> EndpointSettings:
    """Flags first, then OPENAI_BASE_URL, OPENAI_MODEL (or ADAEXPLORE_BENCH_MODEL) and OPENAI_API_KEY."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    name = model or os.environ.get("ADAEXPLORE_BENCH_MODEL") or os.environ.get("OPENAI_MODEL")
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not name:
        raise EndpointError("no model given: pass --model or set OPENAI_MODEL")
    if not key:
        raise EndpointError("no API key given: pass --api-key or set OPENAI_API_KEY (any string for a local "
                            "server that checks none)")
    return EndpointSettings(base_url=url, model=name, api_key=key, temperature=temperature,
                            max_answer_tokens=max_answer_tokens)


def _openai() -> Any:
    try:
        import openai
    except ImportError:
        raise EndpointError(f"the openai package is missing: {EXTRA_HINT}") from None
    return openai


class ChatEndpoint:
    """Chat completions against one endpoint and model, with plain-text answers."""

    def __init__(self, settings: EndpointSettings):
        self.settings = settings
        self._openai = _openai()
        self._client = self._openai.AsyncOpenAI(base_url=settings.base_url, api_key=settings.api_key,
                                                timeout=settings.timeout_s, max_retries=2)

    async def check(self) -> None:
        """Ask for a one-token answer; raise EndpointError saying what is wrong when that fails."""
        o = self._openai
        probe = self._client.with_options(max_retries=0, timeout=min(60.0, self.settings.timeout_s))
        try:  # with the run's own parameters, so one the model refuses (temperature, max_tokens) shows here
            await probe.chat.completions.create(model=self.settings.model, **self._params(),
                                                messages=[{"role": "user", "content": "Reply with OK."}])
        except o.AuthenticationError as exc:
            raise EndpointError(f"the endpoint {self.settings.base_url} refused the API key ({exc.status_code})") \
                from None
        except o.PermissionDeniedError as exc:
            raise EndpointError(f"the endpoint {self.settings.base_url} denied access ({exc.status_code})") from None
        except o.NotFoundError:
            raise EndpointError(f"the endpoint {self.settings.base_url} has no chat completions for model "
                                f"{self.settings.model!r} (404): check --base-url and --model") from None
        except o.APIConnectionError as exc:
            raise EndpointError(f"cannot reach the endpoint {self.settings.base_url}: {exc.__cause__ or exc}") \
                from None
        except o.APIStatusError as exc:
            raise EndpointError(f"the endpoint {self.settings.base_url} answered {exc.status_code}: "
                                f"{str(exc)[:300]}") from None

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"temperature": self.settings.temperature}
        if self.settings.max_answer_tokens is not None:
            p["max_tokens"] = self.settings.max_answer_tokens
        return p

    async def ask(self, system: str, user: str) -> Answer:
        """One answer to a system and a user message."""
        o = self._openai
        try:
            r = await self._client.chat.completions.create(
                model=self.settings.model, **self._params(),
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}])
        except o.APIError as exc:
            raise EndpointError(f"the endpoint failed: {str(exc)[:300]}") from None
        text = (r.choices[0].message.content or "") if r.choices else ""
        used = r.usage.total_tokens if r.usage is not None else (len(system) + len(user) + len(text)) // 4
        return Answer(text=text, tokens=int(used))

    async def close(self) -> None:
        await self._client.close()
