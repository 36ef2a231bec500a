"""Policies: the models that drive the harness, and the one spec grammar that builds them."""

from sleuth.policies.counting import ChatTokenCounter
from sleuth.policies.openai_chat import EndpointError, OpenAIChatPolicy
from sleuth.policies.scripted import ScriptedPolicy, ScriptExhausted, call, turn
from sleuth.policies.spec import (
    DEFAULT_POLICY,
    SCRIPTED,
    BuiltPolicy,
    PolicyFactory,
    PolicyOptions,
    PolicySpec,
    build_policy,
    make_policy,
    parse_policy_spec,
)

__all__ = [
    "DEFAULT_POLICY",
    "SCRIPTED",
    "BuiltPolicy",
    "ChatTokenCounter",
    "EndpointError",
    "OpenAIChatPolicy",
    "PolicyFactory",
    "PolicyOptions",
    "PolicySpec",
    "ScriptExhausted",
    "ScriptedPolicy",
    "build_policy",
    "call",
    "make_policy",
    "parse_policy_spec",
    "turn",
]
