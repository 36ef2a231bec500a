"""The LLM task pipeline (explore → verify → distract → extend → expand) against any
OpenAI-compatible endpoint: ``llm`` (record/replay client), ``records``, ``runner``, ``agent``,
the stages and ``stages`` (running them in order). Its ``verify`` stage checks extractions with
the shared :mod:`sleuth.datagen.evidence`."""
