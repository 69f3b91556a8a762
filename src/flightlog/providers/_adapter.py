"""The part every official-SDK adapter shares: client ownership, capabilities, the call and its errors.

A concrete adapter names its SDK, client class and endpoint (class attributes), renders :meth:`SdkAdapter.request_body`, supplies a stream
builder (stream events → the response object an unstreamed call returns) and a parser (response object →
:class:`ModelResponse`). Both paths end in the same parser, which is what makes a streamed call return
exactly what the unstreamed call would.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, Self, TypedDict

from ._sdk import JsonObj, call_sdk_method, import_sdk, provider_error, to_json
from .base import Capabilities, ModelRequest, ModelResponse, ProviderError, TokenCallback

__all__ = ["SdkAdapter", "SdkOptions", "StreamBuilder"]


class StreamBuilder(Protocol):
    """Folds stream events (decoded JSON) into the response object of the unstreamed call."""

    def feed(self, event: Any) -> None:
        """Apply one event."""
        ...

    def result(self) -> JsonObj:
        """The assembled response object."""
        ...


class SdkOptions(TypedDict, total=False):
    """The keyword arguments of :class:`SdkAdapter` after ``model``, for subclasses that add their own."""

    api_key: str | None
    base_url: str | None
    max_retries: int
    client: Any
    capabilities: Capabilities | None
    request_options: Mapping[str, Any] | None


class SdkAdapter(ABC):
    """Base of the SDK adapters (see the concrete classes for rendering and parsing rules).

    Attributes:
        protocol: Wire protocol identity (``ProviderReplay.protocol``).
        model: The model id sent with every request.
        request_options: Extra top-level request fields merged over the rendered body (None removes a key).

    A subclass declares ``protocol``, ``default_capabilities``, ``sdk_name`` (the SDK module),
    ``client_class`` (its async client class's name) and ``endpoint`` (the dotted path, from the client,
    of the resource whose ``create`` is called, e.g. ``chat.completions``).
    """

    protocol: str
    default_capabilities: ClassVar[Capabilities]
    sdk_name: ClassVar[str]
    client_class: ClassVar[str]
    endpoint: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 0,
        client: Any = None,
        capabilities: Capabilities | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Build the adapter (and the SDK client unless one is given).

        Args:
            model: Model id sent with every request.
            api_key: API key (default: the SDK's environment lookup).
            base_url: API base URL (default: the SDK's), e.g. a ``ReplayServer.base_url``.
            max_retries: SDK-level retries; 0 leaves retrying to the kernel.
            client: A ready SDK async client (then ``api_key``/``base_url``/``max_retries`` are unused, and
                :meth:`aclose` leaves it open).
            capabilities: Declared capabilities (default: the class's ``default_capabilities``).
            request_options: Extra top-level request fields merged over the rendered body; a None value
                removes the key.

        Raises:
            ImportError: The SDK is missing (``pip install 'flightlog[providers]'``).
            ProviderError: The SDK refused to build a client (e.g. no API key anywhere).
        """
        self.model = model
        self._sdk = import_sdk(self.sdk_name)
        self._owns_client = client is None
        self._client = client if client is not None else self._new_client(api_key, base_url, max_retries)
        self._capabilities = capabilities or self.default_capabilities
        self.request_options: dict[str, Any] = dict(request_options or {})

    def _new_client(self, api_key: str | None, base_url: str | None, max_retries: int) -> Any:
        try:
            return getattr(self._sdk, self.client_class)(
                api_key=api_key, base_url=base_url, max_retries=max_retries
            )
        except Exception as exc:
            error = provider_error(exc, self._sdk, f"{self.protocol} client")
            if error is None:
                raise
            raise error from exc

    def capabilities(self) -> Capabilities:
        """Declared capabilities of this route position."""
        return self._capabilities

    async def aclose(self) -> None:
        """Close the SDK client's connections if this adapter created the client."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def complete(
        self, request: ModelRequest, *, on_token: TokenCallback | None = None
    ) -> ModelResponse:
        """Call the model.

        Args:
            request: The model call.
            on_token: Receives streamed text deltas when the request streams.

        Returns:
            The neutral message, its ``ProviderReplay``, usage and stop reason.

        Raises:
            ProviderError: The SDK call failed (HTTP status, timeout, connection, malformed response).
        """
        return self.parse(await self.send(self.request_body(request), on_token))

    async def send(self, body: JsonObj, on_token: TokenCallback | None) -> JsonObj:
        """Send a rendered body (streaming when ``body["stream"]`` is true) and return the response object.

        Raises:
            ProviderError: As for :meth:`complete`.
        """
        try:
            if body.get("stream") is True:
                return await self._stream(body, on_token)
            return await self._create(body)
        except Exception as exc:
            error = provider_error(exc, self._sdk, f"{self.protocol} {self.model}")
            if error is None:
                raise
            raise error from exc

    async def _create(self, body: JsonObj) -> JsonObj:
        raw = await call_sdk_method(self._endpoint().with_raw_response.create, body)
        text = await raw.http_response.aread()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ProviderError(
                f"{self.protocol} {self.model}: response is not JSON", retryable=False
            ) from exc
        if not isinstance(data, dict):
            raise ProviderError(
                f"{self.protocol} {self.model}: response is not a JSON object", retryable=False
            )
        return data

    def _endpoint(self) -> Any:
        resource = self._client
        for name in self.endpoint.split("."):
            resource = getattr(resource, name)
        return resource

    async def _stream(self, body: JsonObj, on_token: TokenCallback | None) -> JsonObj:
        stream = await call_sdk_method(self._endpoint().create, body)
        builder = self._stream_builder(on_token)
        try:
            async for event in stream:
                builder.feed(to_json(event))
        finally:
            await stream.close()
        return builder.result()

    @abstractmethod
    def _stream_builder(self, on_token: TokenCallback | None) -> StreamBuilder:
        """A fresh builder for one streamed call."""

    @abstractmethod
    def request_body(self, request: ModelRequest) -> JsonObj:
        """The JSON body :meth:`complete` sends for ``request``."""

    @abstractmethod
    def parse(self, payload: JsonObj) -> ModelResponse:
        """A response object (decoded JSON, streamed or not) → :class:`ModelResponse`."""
