"""sleuth inside the frameworks people already use: a LangChain retriever
(:mod:`sleuth.integrations.langchain`, extra ``[langchain]``) and a LlamaIndex retriever
(:mod:`sleuth.integrations.llamaindex`, extra ``[llamaindex]``), both over :mod:`sleuth.api`.
Each module imports its framework, so import the one you use."""
