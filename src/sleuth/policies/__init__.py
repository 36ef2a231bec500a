"""Policies: the models that drive the harness."""

from sleuth.policies.counting import ChatTokenCounter
from sleuth.policies.openai_chat import EndpointError, OpenAIChatPolicy
from sleuth.policies.scripted import ScriptedPolicy, ScriptExhausted, call, turn

__all__ = [
    "ChatTokenCounter",
    "EndpointError",
    "OpenAIChatPolicy",
    "ScriptExhausted",
    "ScriptedPolicy",
    "call",
    "turn",
]
