"""Cairn's Python SDK: write a resource provider, serve it as a webhook.

    from cairn_provider import Provider, ResourceType, String, serve

See README.md beside this package."""

from .errors import (AlreadyExists, InternalFailure, InvalidRequest, NotFound,
                     NotUpdatable, ProviderError, Throttling, Timeout)
from .hook import (Hook, HookRequest, hook_server, in_progress, internal_failure, non_compliant,
                   serve_hook, success)
from .macro import Macro, MacroError, MacroRequest, macro_server, serve_macro
from .provider import (Provider, Request, Result, compare, deleted, found, in_sync, not_checked,
                       not_supported)
from .schema import (Boolean, Integer, Json, List, Map, Number, Property, ResourceType,
                     String)
from .webhook import Handler, serve, server, signature_problem

__all__ = [
    "AlreadyExists", "Boolean", "Handler", "Hook", "HookRequest", "Integer", "InternalFailure",
    "InvalidRequest",
    "Json", "List", "Macro", "MacroError", "MacroRequest", "Map", "NotFound", "NotUpdatable",
    "Number", "Property", "Provider",
    "ProviderError", "Request", "ResourceType", "Result", "String", "Throttling", "Timeout",
    "compare", "deleted", "found", "in_sync", "macro_server", "not_checked", "not_supported",
    "hook_server", "in_progress", "internal_failure", "non_compliant", "serve", "serve_hook",
    "serve_macro", "success",
    "server", "signature_problem",
]
