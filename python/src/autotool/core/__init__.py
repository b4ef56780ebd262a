"""The model side of an agent: `autotool.core.llm` picks and reaches the model (the official
`openai` and `anthropic` SDKs, from `pip install autotool-mcp[models]`)."""
