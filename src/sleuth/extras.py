"""Optional features and the extra that installs each (``pip install 'sleuth[EXTRA]'``)."""

from __future__ import annotations

EXTRAS = {
    "train": "local models and training (transformers, peft, accelerate, ctranslate2)",
    "serve": "the MCP server (mcp)",
    "harmony": "gpt-oss / Context-1 in the harmony format (openai-harmony)",
    "langchain": "the LangChain retriever (langchain-core)",
    "llamaindex": "the LlamaIndex retriever (llama-index-core)",
}


def missing_extra(extra: str, error: ImportError) -> ImportError:
    """The ImportError to raise when ``error`` means the ``extra`` is not installed.

    Example::

        try:
            from mcp.server.mcpserver import MCPServer
        except ImportError as exc:
            raise missing_extra("serve", exc) from exc
    """
    what = EXTRAS[extra]
    module = error.name or "a module"
    return ImportError(
        f"{module} is not installed: {what} needs the {extra!r} extra "
        f"(pip install 'sleuth[{extra}]')",
        name=error.name,
    )
